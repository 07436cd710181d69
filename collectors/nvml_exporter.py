"""An NVML reading rendered as dcgm-exporter's `/metrics` (same names and labels).

Labels per series: `gpu`, `UUID` (the parent's, also on MIG series), `pci_bus_id`, `device`,
`modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, and on MIG series `GPU_I_PROFILE` and
`GPU_I_ID`. Like dcgm-exporter, GPU_UTIL is not reported for MIG instances. Pod labels are
added when a resolver maps a device's processes to a pod (dcgm-exporter uses the kubelet
pod-resources socket for that); without one the series carry no pod and count as unattributed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from gpuledger.collectors.nvml_read import Gpu, Instance, Process, Reading

PodResolver = Callable[[Sequence[Process]], dict[str, str]]
"""Processes of a device → {"pod": ..., "namespace": ..., "container": ...} (or {})."""

FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr_engine_active", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active", "Ratio of cycles an SM has at least one warp assigned."),
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_util", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "fb_used_mib", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "fb_free_mib", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (in W)."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", "Ratio of cycles the tensor pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_DEV_GPU_TEMP", "gpu_temp_c", "GPU temperature (in C)."),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs.items()) + "}"


def _value(gpu: Gpu, inst: Instance | None, column: str) -> float | None:
    if inst is not None:
        if column in ("fb_used_mib", "fb_free_mib"):
            value: float | None = getattr(inst, column)
            return value
        if column == "gpu_util":
            return None
        if column in inst.prof:
            return inst.prof[column]
        return None if column in ("gr_engine_active", "sm_active", "tensor_active", "dram_active") \
            else getattr(gpu, column, None)
    if column in gpu.prof:
        return gpu.prof[column]
    return getattr(gpu, column, None)


Series = tuple[Gpu, Instance | None, dict[str, str]]


def _series(reading: Reading, hostname: str, resolver: PodResolver | None) -> Iterator[Series]:
    for gpu in reading.gpus:
        base = {
            "gpu": str(gpu.index), "UUID": gpu.uuid, "pci_bus_id": gpu.pci_bus_id,
            "device": f"nvidia{gpu.index}", "modelName": gpu.name, "Hostname": hostname,
            "DCGM_FI_DRIVER_VERSION": reading.driver_version,
        }
        if gpu.mig_enabled:
            for inst in gpu.instances:
                labels = {**base, "GPU_I_PROFILE": inst.profile, "GPU_I_ID": str(inst.gpu_i_id)}
                labels.update(resolver(inst.processes) if resolver else {})
                yield gpu, inst, labels
        else:
            yield gpu, None, {**base, **(resolver(gpu.processes) if resolver else {})}


def render(reading: Reading, hostname: str, resolver: PodResolver | None = None) -> str:
    """Prometheus text exposition (version 0.0.4) of one reading."""
    series = list(_series(reading, hostname, resolver))
    lines: list[str] = []
    for metric, column, help_text in FIELDS:
        rows = [(labels, _value(gpu, inst, column)) for gpu, inst, labels in series]
        rows = [(labels, v) for labels, v in rows if v is not None]
        if not rows:
            continue
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        lines += [f"{metric}{_labels(labels)} {value:g}" for labels, value in rows]
    procs = [(gpu, inst, p) for gpu, inst, _ in series for p in (inst.processes if inst else gpu.processes)]
    if procs:
        lines += ["# HELP gpuledger_nvml_process_fb_used_mib Framebuffer used by a process (in MiB).",
                  "# TYPE gpuledger_nvml_process_fb_used_mib gauge"]
        for gpu, inst, p in procs:
            labels = {"UUID": gpu.uuid, "Hostname": hostname, "pid": str(p.pid)}
            if inst is not None:
                labels["GPU_I_ID"] = str(inst.gpu_i_id)
            if p.fb_used_mib is not None:
                lines.append(f"gpuledger_nvml_process_fb_used_mib{_labels(labels)} {p.fb_used_mib:g}")
    return "\n".join(lines) + "\n"
