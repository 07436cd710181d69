"""Read GPUs through NVML (`pynvml`, package nvidia-ml-py): devices, MIG instances, utilization,
memory, power, temperature, processes, and the profiling ratios via GPM where supported.

Read-only by construction: only `nvmlDeviceGet*`, `nvmlSystemGet*` and `nvmlGpm*Sample*`/
`nvmlGpmMetricsGet` calls are made; nothing here sets MIG mode, clocks, power limits or any
other state. The NVML module is injected (`NvmlReader(nvml)`), so tests pass a small fake
implementing the same calls; production passes `pynvml`.

GPM (Hopper and later) yields what DCGM calls PROF fields: graphics engine active
(GR_ENGINE_ACTIVE), SM active, tensor active and DRAM active, per GPU and per MIG instance.
They are rates between two samples, so the reader keeps the previous sample per device and
reports them from the second read on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024
GPM_FIELDS: dict[str, str] = {
    "NVML_GPM_METRIC_GRAPHICS_UTIL": "gr_engine_active",
    "NVML_GPM_METRIC_SM_UTIL": "sm_active",
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": "tensor_active",
    "NVML_GPM_METRIC_DRAM_BW_UTIL": "dram_active",
}


@dataclass
class Process:
    pid: int
    fb_used_mib: float | None


@dataclass
class Instance:
    """One MIG GPU instance."""

    gpu_i_id: int
    profile: str
    uuid: str | None
    fb_used_mib: float | None
    fb_free_mib: float | None
    processes: list[Process] = field(default_factory=list)
    prof: dict[str, float] = field(default_factory=dict)


@dataclass
class Gpu:
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    fb_used_mib: float | None
    fb_free_mib: float | None
    gpu_util: float | None
    power_w: float | None
    gpu_temp_c: float | None
    mig_enabled: bool
    instances: list[Instance] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    prof: dict[str, float] = field(default_factory=dict)


@dataclass
class Reading:
    driver_version: str
    gpus: list[Gpu]
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlReader:
    """Stateful reader (GPM needs the previous sample); call `close()` to shut NVML down."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.nvml.nvmlInit()
        self._previous: dict[tuple[int, int], Any] = {}

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    # 1. One call, guarded: a field a card does not support is None, not a crash.
    def _try(self, errors: list[str], what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            if "Not Supported" not in str(exc) and "Not Found" not in str(exc):
                errors.append(f"{what}: {exc}")
            return None

    def read(self) -> Reading:
        nvml = self.nvml
        errors: list[str] = []
        driver = _text(self._try(errors, "driver version", nvml.nvmlSystemGetDriverVersion) or "")
        gpus = [self._gpu(i, errors) for i in range(nvml.nvmlDeviceGetCount())]
        return Reading(driver, gpus, errors)

    # 2. A whole GPU.
    def _gpu(self, index: int, errors: list[str]) -> Gpu:
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        name = _text(nvml.nvmlDeviceGetName(handle))
        pci = self._try(errors, f"{uuid} pci", nvml.nvmlDeviceGetPciInfo, handle)
        memory = self._try(errors, f"{uuid} memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        util = self._try(errors, f"{uuid} utilization", nvml.nvmlDeviceGetUtilizationRates, handle)
        power = self._try(errors, f"{uuid} power", nvml.nvmlDeviceGetPowerUsage, handle)
        temp = self._try(errors, f"{uuid} temperature", nvml.nvmlDeviceGetTemperature, handle,
                         nvml.NVML_TEMPERATURE_GPU)
        mode = self._try(errors, f"{uuid} MIG mode", nvml.nvmlDeviceGetMigMode, handle)
        mig = bool(mode and mode[0] == nvml.NVML_DEVICE_MIG_ENABLE)
        gpu = Gpu(
            index=index, uuid=uuid, name=name, pci_bus_id=_text(pci.busId) if pci else "",
            fb_used_mib=memory.used / MIB if memory else None,
            fb_free_mib=memory.free / MIB if memory else None,
            gpu_util=None if mig or util is None else float(util.gpu),
            power_w=power / 1000.0 if power is not None else None,
            gpu_temp_c=float(temp) if temp is not None else None,
            mig_enabled=mig,
        )
        if mig:
            gpu.instances = self._instances(handle, name, errors)
        else:
            gpu.processes = self._processes(handle, errors, uuid)
        gpu.prof = self._gpm(handle, index, None, errors)
        for inst in gpu.instances:
            inst.prof = self._gpm(handle, index, inst.gpu_i_id, errors)
        return gpu

    # 3. MIG instances: walk the MIG device slots of the parent.
    def _instances(self, parent: Any, parent_name: str, errors: list[str]) -> list[Instance]:
        nvml = self.nvml
        out: list[Instance] = []
        slots = self._try(errors, "max MIG devices", nvml.nvmlDeviceGetMaxMigDeviceCount, parent) or 0
        for slot in range(slots):
            get = nvml.nvmlDeviceGetMigDeviceHandleByIndex
            handle = self._try(errors, f"MIG slot {slot}", get, parent, slot)
            if handle is None:
                continue
            gi = int(nvml.nvmlDeviceGetGpuInstanceId(handle))
            attrs = nvml.nvmlDeviceGetAttributes(handle)
            memory = self._try(errors, f"MIG {gi} memory", nvml.nvmlDeviceGetMemoryInfo, handle)
            uuid = self._try(errors, f"MIG {gi} uuid", nvml.nvmlDeviceGetUUID, handle)
            out.append(Instance(
                gpu_i_id=gi,
                profile=profile_name(parent_name, int(attrs.gpuInstanceSliceCount), int(attrs.memorySizeMB)),
                uuid=_text(uuid) if uuid else None,
                fb_used_mib=memory.used / MIB if memory else None,
                fb_free_mib=memory.free / MIB if memory else None,
                processes=self._processes(handle, errors, f"MIG {gi}"),
            ))
        return sorted(out, key=lambda i: i.gpu_i_id)

    def _processes(self, handle: Any, errors: list[str], what: str) -> list[Process]:
        procs = self._try(errors, f"{what} processes", self.nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        return [
            Process(int(p.pid), p.usedGpuMemory / MIB if p.usedGpuMemory is not None else None)
            for p in procs or []
        ]

    # 4. GPM: profiling ratios from two samples (none on the first read).
    def _gpm(self, handle: Any, index: int, gpu_i_id: int | None, errors: list[str]) -> dict[str, float]:
        nvml = self.nvml
        if not hasattr(nvml, "nvmlGpmSampleAlloc"):
            return {}
        support = self._try(errors, "GPM support", nvml.nvmlGpmQueryDeviceSupport, handle)
        if support is None or not support.isSupportedDevice:
            return {}
        sample = nvml.nvmlGpmSampleAlloc()
        if gpu_i_id is None:
            got = self._try(errors, "GPM sample", nvml.nvmlGpmSampleGet, handle, sample)
        else:
            got = self._try(errors, "GPM MIG sample", nvml.nvmlGpmMigSampleGet, handle, gpu_i_id, sample)
        key = (index, -1 if gpu_i_id is None else gpu_i_id)
        previous = self._previous.get(key)
        if got is None:
            nvml.nvmlGpmSampleFree(sample)
            return {}
        self._previous[key] = sample
        if previous is None:
            return {}
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(GPM_FIELDS)
        request.sample1 = previous
        request.sample2 = sample
        for i, name in enumerate(GPM_FIELDS):
            request.metrics[i].metricId = getattr(nvml, name)
        result = self._try(errors, "GPM metrics", nvml.nvmlGpmMetricsGet, request)
        nvml.nvmlGpmSampleFree(previous)
        if result is None:
            return {}
        out: dict[str, float] = {}
        for i, column in enumerate(GPM_FIELDS.values()):
            metric = result.metrics[i]
            if metric.nvmlReturn == 0:
                out[column] = max(0.0, min(1.0, float(metric.value) / 100.0))
        return out


def profile_name(parent_name: str, compute_slices: int, memory_mb: int) -> str:
    """The MIG profile (e.g. `3g.40gb`) for an instance, from our MIG facts when the model is known.

    `core.mig` is imported here, not at module level, so `tools/gpu_check.py` can run this module
    on a GPU machine that has only nvidia-ml-py (no PyYAML): the name is then computed.
    """
    try:
        from gpuledger.core.mig import canonical_model, catalog

        model = catalog().get(canonical_model(parent_name))
    except ImportError:
        model = None
    if model is not None:
        candidates = [p for p in model.profiles.values()
                      if p.compute == compute_slices and not p.media_extensions]
        if candidates:
            return min(candidates, key=lambda p: abs((p.memory_mib or _gb(p.name) * 1024) - memory_mb)).name
    return f"{compute_slices}g.{round(memory_mb / 1024)}gb"


def _gb(name: str) -> int:
    return int(name.split(".")[1].removesuffix("gb").split("+")[0])
