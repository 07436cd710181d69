"""A tiny hand-built fleet written as OpenMetrics, with its truth computed by hand.

Layout (3 hours from T0 at 60 s, so 180 instants):
- node `node-a.example` (label `Hostname`): GPU-a0 held by team-a/train-1 for the first 90
  minutes, then idle (no pod labels); GPU-a1 held by team-b/serve-1 throughout. A second
  scrape job duplicates GPU-a1's GR_ENGINE_ACTIVE series for minutes 10..19.
- node `node-b` (label `hostname`, the 2026 spelling): GPU-b0 in MIG mode with instances
  GPU_I_ID 1 and 2 (`3g.40gb`); instance 1 held by team-a/infer-1 through `exported_*`
  labels (ServiceMonitor with honorLabels false; the plain `pod` label is the exporter's).
- bad samples: GR_ENGINE_ACTIVE NaN at minute 5 and 1.7 at minute 6 on GPU-a0; POWER
  -3 at minute 7 on GPU-a1; a series without UUID (2 samples).
- namespaces: team-a labelled `team=alpha`; team-b unlabelled (fallback rule `team-(.*)` → `\\1`).
- vLLM: team-b/serve-1 model `llama` prompt counter +10 per minute, reset at minute 100.
- Kueue: ClusterQueue `cq-a`, flavor `h100`, resource `nvidia.com/gpu`: usage 2, quota 4;
  pending workloads 3.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEP = 60
MINUTES = 180
MODEL = "NVIDIA H100 80GB HBM3"
EXPORTER = {"pod": "dcgm-exporter-x1", "namespace": "gpu-operator", "container": "exporter"}


def _ts(minute: int) -> int:
    return int(T0.timestamp()) + STEP * minute


def _labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def active(device: str, minute: int) -> float:
    """The GR_ENGINE_ACTIVE the fleet reports (before bad samples are injected)."""
    base = {"GPU-a0": 0.5, "GPU-a1": 0.8, "GPU-b0/1": 0.3, "GPU-b0/2": 0.0}[device]
    return round(base + (minute % 10) / 100, 4)


def devices() -> list[dict[str, str]]:
    a = {"Hostname": "node-a.example", "modelName": MODEL}
    b = {"hostname": "node-b", "modelName": MODEL}
    return [
        {"gpu": "0", "UUID": "GPU-a0", **a},
        {"gpu": "1", "UUID": "GPU-a1", **a},
        {"gpu": "0", "UUID": "GPU-b0", "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1", **b},
        {"gpu": "0", "UUID": "GPU-b0", "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "2", **b},
    ]


def key(dev: dict[str, str]) -> str:
    return dev["UUID"] + (f"/{dev['GPU_I_ID']}" if "GPU_I_ID" in dev else "")


def holder(device: str, minute: int) -> tuple[str, str] | None:
    """(namespace, pod) holding the device at `minute`, per the layout above."""
    if device == "GPU-a0":
        return ("team-a", "train-1") if minute < 90 else None
    if device == "GPU-a1":
        return ("team-b", "serve-1")
    if device == "GPU-b0/1":
        return ("team-a", "infer-1")
    return None


def workload_labels(device: str, minute: int) -> dict[str, str]:
    held = holder(device, minute)
    if device.startswith("GPU-b0"):
        # honorLabels false: the exporter's own pod in plain labels, the workload in exported_*
        out = dict(EXPORTER)
        if held:
            out.update({"exported_namespace": held[0], "exported_pod": held[1], "exported_container": "main"})
        return out
    return {"namespace": held[0], "pod": held[1], "container": "main"} if held else {}


def _dcgm_lines() -> Iterator[str]:
    fields = {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": active,
        "DCGM_FI_DEV_FB_USED": lambda d, m: 1000.0 + m,
        "DCGM_FI_DEV_FB_FREE": lambda d, m: 80000.0 - m,
        "DCGM_FI_DEV_POWER_USAGE": lambda d, m: 300.0,
    }
    for metric, value in fields.items():
        yield f"# TYPE {metric} gauge"
        for dev in devices():
            k = key(dev)
            series: dict[str, list[str]] = {}
            for minute in range(MINUTES):
                v = value(k, minute)
                if metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and k == "GPU-a0":
                    v = {5: math.nan, 6: 1.7}.get(minute, v)
                if metric == "DCGM_FI_DEV_POWER_USAGE" and k == "GPU-a1" and minute == 7:
                    v = -3.0
                lab = _labels({**dev, **workload_labels(k, minute)})
                text = "NaN" if isinstance(v, float) and math.isnan(v) else repr(v)
                series.setdefault(lab, []).append(f"{metric}{lab} {text} {_ts(minute)}")
            for lines in series.values():
                yield from lines
        if metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            dev = devices()[1]
            lab = _labels({**dev, **workload_labels("GPU-a1", 0), "job": "second-scrape"})
            for minute in range(10, 20):
                yield f"{metric}{lab} {active('GPU-a1', minute)} {_ts(minute)}"
            for minute in (0, 1):
                yield f'{metric}{{gpu="3",Hostname="node-a.example"}} 0.1 {_ts(minute)}'


def _other_lines() -> Iterator[str]:
    yield "# TYPE kube_namespace_labels gauge"
    for minute in range(0, MINUTES, 5):
        yield f'kube_namespace_labels{{namespace="team-a",label_team="alpha"}} 1 {_ts(minute)}'
    for minute in range(0, MINUTES, 5):
        yield f'kube_namespace_labels{{namespace="team-b"}} 1 {_ts(minute)}'
    yield "# TYPE vllm:prompt_tokens counter"
    for minute in range(MINUTES):
        yield (f'vllm:prompt_tokens_total{{namespace="team-b",pod="serve-1",model_name="llama"}} '
               f"{prompt_tokens(minute)} {_ts(minute)}")
    labels = 'cluster_queue="cq-a",flavor="h100",resource="nvidia.com/gpu"'
    for metric, value in (("kueue_cluster_queue_resource_usage", 2), ("kueue_cluster_queue_nominal_quota", 4)):
        yield f"# TYPE {metric} gauge"
        for minute in range(MINUTES):
            yield f"{metric}{{{labels}}} {value} {_ts(minute)}"
    yield "# TYPE kueue_pending_workloads gauge"
    for minute in range(MINUTES):
        yield f'kueue_pending_workloads{{cluster_queue="cq-a",status="active"}} 3 {_ts(minute)}'


def prompt_tokens(minute: int) -> float:
    return float(10 * minute if minute < 100 else 10 * (minute - 100))


def write(path: Path) -> Path:
    path.write_text("\n".join([*_dcgm_lines(), *_other_lines(), "# EOF"]) + "\n")
    return path


def window_end() -> datetime:
    return T0 + timedelta(seconds=STEP * MINUTES)
