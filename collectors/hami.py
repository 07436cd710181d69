"""HAMi vGPU as HAMi publishes it: which cards it shares, and which card each pod got.

dcgm-exporter names no pod on a HAMi card (HAMi's device IDs `GPU-<uuid>-<n>` are not card
UUIDs, HAMi issues 112 and 1032), kube-state-metrics says what a pod asked for but never which
card it got, and HAMi advertises no `nvidia.com/gpumem` capacity. What HAMi itself publishes
(tests/fixtures/planes/hami/, SOURCES.md):

- **The cards.** Node annotation `hami.io/node-nvidia-register` (the device plugin,
  `register.go` -> `MarshalNodeDevices`): a JSON list of `{id, index, count, devmem, devcore,
  type, numa, mode, health}` with zero fields omitted; older releases wrote `id,count,devmem,
  devcore,type,numa,health:` (7 fields) or `...,index,mode:` (9). From Prometheus: the
  scheduler's `hami_gpu_memory_limit_bytes{node,device_uuid,device_index,device_type}` (bytes)
  and, with `--legacy-metrics` or before v2.9, `GPUDeviceMemoryLimit{nodeid,deviceuuid,...}`.
- **Who holds what.** Pod annotation `hami.io/vgpu-devices-allocated` (`devices.go
  EncodePodSingleDevice`): containers split by `;` (init containers first, empty entries keep
  their place), devices by `:`, fields `UUID,Type,UsedMemMiB,UsedCores` (3 fields, without the
  type, in the oldest releases). A `gpumem-percentage` request is already MiB here. From
  Prometheus: `hami_vgpu_memory_allocated_bytes` / `hami_vgpu_core_allocated_ratio{namespace,
  node,pod,container_index,device_uuid}` (cores normalized `ceil(used/total*100)`), legacy
  `vGPUMemoryAllocated` / `vGPUCoreAllocated{podnamespace,nodename,podname,containeridx,
  deviceuuid}` (cores raw, normalized here by the card's `GPUDeviceCoreLimit`).

Both sources give `vgpu_allocations` rows (`core.frames_hami`), and HAMi's cards become `vgpu`
cards in `gpus`. Behind a ServiceMonitor without `honorLabels` the series' own `namespace`,
`pod` and `node` arrive as `exported_*`: both spellings are read, the exported one first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from gpuledger.collectors.prom_parse import Matrix, number_runs, sample_spacing
from gpuledger.core.frames import GPUS, polars_schema
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.core.mig import canonical_model

REGISTER = "hami.io/node-nvidia-register"
ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
SCHEDULER_NAME = "hami-scheduler"
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CardDevice:
    """One card of a node's register annotation."""

    uuid: str
    index: int
    count: int
    devmem_mib: float
    devcore: float
    type: str


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One device of one container in the allocation annotation."""

    uuid: str
    mem_mib: float
    cores_pct: float


# Decoding ------------------------------------------------------------------------------
def decode_node_devices(text: str | None) -> list[CardDevice]:
    """The cards of a register annotation, in any of its three forms (module docstring);
    entries that do not parse are left out (a malformed annotation names no card)."""
    text = (text or "").strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            return []
        return [card for item in items if isinstance(item, dict) and (card := _json_card(item))]
    out = []
    for entry in text.split(":"):
        fields = entry.split(",")
        if len(fields) not in (7, 9) or not fields[0]:
            continue
        try:
            out.append(CardDevice(uuid=fields[0], index=int(fields[7]) if len(fields) == 9 else 0,
                                  count=int(fields[1]), devmem_mib=float(fields[2]),
                                  devcore=float(fields[3]), type=fields[4]))
        except ValueError:
            continue
    return out


def _json_card(item: Mapping[str, Any]) -> CardDevice | None:
    try:
        uuid = str(item["id"])
        return CardDevice(uuid=uuid, index=int(item.get("index", 0)), count=int(item.get("count", 0)),
                          devmem_mib=float(item.get("devmem", 0)), devcore=float(item.get("devcore", 0)),
                          type=str(item.get("type", "")))
    except (KeyError, TypeError, ValueError):
        return None


def decode_pod_devices(text: str | None) -> list[list[ContainerDevice]]:
    """Per container (the annotation's order, empty ones kept), its devices."""
    out: list[list[ContainerDevice]] = []
    for container in (text or "").split(";"):
        devices = []
        for entry in container.split(":"):
            fields = entry.split(",")
            if len(fields) < 3 or not fields[0]:
                continue
            mem, cores = (fields[2], fields[3]) if len(fields) >= 4 else (fields[1], fields[2])
            try:
                devices.append(ContainerDevice(fields[0], float(mem), float(cores)))
            except ValueError:
                continue
        out.append(devices)
    while out and not out[-1]:
        out.pop()  # the annotation ends with `;`: no container after it
    return out


def card_model(device_type: str) -> str:
    """The canonical model of HAMi's device type (`NVIDIA A100-SXM4-80GB`; older plugins and
    the monitor write `NVIDIA-NVIDIA A100-SXM4-80GB`)."""
    name = device_type[len("NVIDIA-"):] if device_type.startswith("NVIDIA-NVIDIA") else device_type
    return canonical_model(name) if name else "unknown"


# The Kubernetes API --------------------------------------------------------------------
def is_hami_node(item: Mapping[str, Any]) -> bool:
    return REGISTER in ((item.get("metadata") or {}).get("annotations") or {})


def frames_from_api(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], at: datetime,
) -> tuple[dict[str, pl.DataFrame], set[str]]:
    """`gpus` (the registered cards, `vgpu`) and `vgpu_allocations` (source `api`, each alive
    container device from the pod's start to `at`) of one snapshot, and the names of the nodes
    HAMi shares (a register annotation, or a pod HAMi placed or scheduled there)."""
    cards: dict[str, CardDevice] = {}
    gpu_rows: list[dict[str, Any]] = []
    hami_nodes: set[str] = set()
    for node in nodes:
        meta = node.get("metadata") or {}
        if not is_hami_node(node):
            continue
        hami_nodes.add(meta["name"])
        for card in decode_node_devices((meta.get("annotations") or {}).get(REGISTER)):
            cards[card.uuid] = card
            gpu_rows.append({
                "uuid": card.uuid, "node": meta["name"], "gpu_index": card.index,
                "model": card_model(card.type), "model_name": card.type or None, "memory_mib": None,
                "pool": None, "sharing_mode": "vgpu", "replicas": None, "first_seen": at, "last_seen": at,
            })
    rows: list[dict[str, Any]] = []
    for pod in pods:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if spec.get("schedulerName") == SCHEDULER_NAME and spec.get("nodeName"):
            hami_nodes.add(spec["nodeName"])
        if ALLOCATED not in annotations or annotations.get(BIND_PHASE) == "failed":
            continue
        if spec.get("nodeName"):
            hami_nodes.add(spec["nodeName"])
        rows.extend(_pod_rows(pod, annotations[ALLOCATED], cards, at))
    frames = {
        "gpus": pl.DataFrame(gpu_rows, schema=polars_schema(GPUS)),
        "vgpu_allocations": pl.DataFrame(rows, schema=polars_schema(VGPU_ALLOCATIONS)),
    }
    return frames, hami_nodes


def _pod_rows(
    pod: Mapping[str, Any], encoded: str, cards: Mapping[str, CardDevice], at: datetime
) -> list[dict[str, Any]]:
    spec, meta, status = pod.get("spec") or {}, pod.get("metadata") or {}, pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return []  # a finished pod holds nothing (HAMi frees its devices)
    started = status.get("startTime") or meta.get("creationTimestamp")
    start = datetime.fromisoformat(started.replace("Z", "+00:00")) if started else at
    out = []
    for index, devices in enumerate(decode_pod_devices(encoded)):
        for dev in devices:
            card = cards.get(dev.uuid)
            out.append({
                "uuid": dev.uuid, "namespace": meta.get("namespace"), "pod": meta.get("name"),
                "container_index": index, "source": "api", "node": spec.get("nodeName"),
                "mem_mib": dev.mem_mib, "cores_pct": dev.cores_pct,
                "card_mem_mib": card.devmem_mib if card and card.devmem_mib > 0 else None,
                "start_ts": min(start, at), "end_ts": at,
            })
    return out


# Prometheus ----------------------------------------------------------------------------
_CURRENT = ("namespace", "pod", "node", "container_index", "device_uuid")
_LEGACY = ("podnamespace", "podname", "nodename", "containeridx", "deviceuuid")
_LABELS = {
    "mem": ("hami_vgpu_memory_allocated_bytes", _CURRENT),
    "cores": ("hami_vgpu_core_allocated_ratio", _CURRENT),
    "legacy_mem": ("vGPUMemoryAllocated", _LEGACY),
    "legacy_cores": ("vGPUCoreAllocated", _LEGACY),
}
"""Per allocation family: its name and its (namespace, pod, node, container, card) labels."""
_EXPORTED = ("namespace", "pod", "node")
CARD_FAMILIES = {
    "hami_gpu_memory_limit_bytes": ("device_uuid", "node", "device_index", "device_type"),
    "GPUDeviceMemoryLimit": ("deviceuuid", "nodeid", "deviceidx", "devicetype"),
    "GPUDeviceCoreLimit": ("deviceuuid", "nodeid", "deviceidx", "devicetype"),
}
"""The scheduler's per-card families read: HAMi's memory total, and the legacy core total that
legacy core values are divided by."""


def fetch_labels(key: str) -> tuple[str, ...]:
    """The labels a range query of one allocation family returns (exported spellings too)."""
    labels = _LABELS[key][1]
    return (*labels, *(f"exported_{name}" for name in labels if name in _EXPORTED))


def raw_selectors() -> dict[str, str]:
    """Per allocation family, the selector read as raw samples at their scrape times
    (`promql.raw_samples`, decision 0212): a span then starts and ends where the scrapes do,
    whatever `prometheus.step` is. HA replicas and scrape labels are separate series of one
    key, their samples one run (`allocations_from_matrices`)."""
    return {key: name for key, (name, _) in _LABELS.items()}


def card_queries(span: str) -> dict[str, str]:
    """Instant queries (at a chunk's last point) of the per-card families over the chunk."""
    return {name: f"max by ({', '.join(labels)}) (last_over_time({name}[{span}]))"
            for name, labels in CARD_FAMILIES.items()}


@dataclass(frozen=True, slots=True)
class CardFacts:
    """What the scheduler says of one card: HAMi's memory total (MiB) and legacy core total."""

    mem_mib: float | None = None
    core_limit: float | None = None


def cards_from_vectors(answers: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, CardFacts]:
    """Per card UUID, its facts from the instant answers of `card_queries`."""
    out: dict[str, CardFacts] = {}
    for name, result in answers.items():
        uuid_label = CARD_FAMILIES[name][0]
        for item in result:
            uuid = (item.get("metric") or {}).get(uuid_label)
            try:
                value = float(item["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if not uuid or not math.isfinite(value) or value <= 0:
                continue
            old = out.get(uuid, CardFacts())
            if name == "GPUDeviceCoreLimit":
                out[uuid] = CardFacts(old.mem_mib, value)
            elif old.mem_mib is None or name == "hami_gpu_memory_limit_bytes":
                out[uuid] = CardFacts(value / MIB, old.core_limit)
    return out


def allocations_from_matrices(
    found: Mapping[str, Matrix], cards: Mapping[str, CardFacts], fallback: timedelta,
) -> pl.DataFrame:
    """`vgpu_allocations` rows (source `prometheus`) of one chunk's raw samples: per container
    device, the runs of its samples (`prom_parse.sample_runs`: each `[first, last + the scrape
    interval)`, a gap past the staleness bound opening a new run; `fallback` stands for the
    interval when no series has two samples); memory in MiB, cores in % of the card (legacy
    raw cores divided by the card's core total)."""
    parts, spacings = [], []
    for new, old in (("mem", "legacy_mem"), ("cores", "legacy_cores")):
        for key in (new, old):
            matrix = found.get(key)
            if matrix is not None and not matrix.empty:
                spacings.append(sample_spacing(matrix, fallback))
                parts.append(_samples(key, matrix).with_columns(
                    pl.lit(new).alias("what"), pl.lit(key == new).alias("current")))
    if not parts:
        return pl.DataFrame(schema=polars_schema(VGPU_ALLOCATIONS))
    spacing = max(spacings)
    keys = ["uuid", "namespace", "pod", "container_index"]
    rows = pl.concat(parts).sort("current", descending=True).unique([*keys, "ts", "what"], keep="first")
    limits = pl.DataFrame(
        {"uuid": list(cards), "_core_limit": [c.core_limit for c in cards.values()],
         "card_mem_mib": [c.mem_mib for c in cards.values()]},
        schema={"uuid": pl.String, "_core_limit": pl.Float64, "card_mem_mib": pl.Float64},
    )
    rows = rows.join(limits, on="uuid", how="left").with_columns(
        pl.when(pl.col("what") == "mem").then(pl.col("value") / MIB)
        .when(pl.col("current")).then(pl.col("value"))
        .otherwise((pl.col("value") / pl.col("_core_limit").fill_null(100.0) * 100).ceil()).alias("value"))
    wide = rows.group_by([*keys, "ts"]).agg(
        pl.col("node").drop_nulls().first(), pl.col("card_mem_mib").first(),
        pl.col("value").filter(pl.col("what") == "mem").first().alias("mem_mib"),
        pl.col("value").filter(pl.col("what") == "cores").first().alias("cores_pct"),
    )
    spans = number_runs(wide, keys, spacing).group_by([*keys, "_run"]).agg(
        pl.col("node").last(), pl.col("mem_mib").drop_nulls().last(),
        pl.col("cores_pct").drop_nulls().last(), pl.col("card_mem_mib").last(),
        pl.col("ts").min().alias("start_ts"), (pl.col("ts").max() + spacing).alias("end_ts"),
    ).with_columns(pl.lit("prometheus").alias("source"))
    schema = polars_schema(VGPU_ALLOCATIONS)
    return spans.select([pl.col(c).cast(schema[c]) for c in VGPU_ALLOCATIONS.column_names])


def _samples(key: str, matrix: Matrix) -> pl.DataFrame:
    """(uuid, namespace, pod, node, container_index, ts, value) of one family's answer."""
    ns, pod, node, ctr, uuid = _LABELS[key][1]

    def either(name: str) -> pl.Expr:
        exported = f"exported_{name}"
        return pl.coalesce(exported, name) if exported in matrix.series.columns else pl.col(name)

    series = matrix.series.select(
        "sid", pl.col(uuid).alias("uuid"), either(ns).alias("namespace"), either(pod).alias("pod"),
        either(node).alias("node"), pl.col(ctr).cast(pl.Int32, strict=False).alias("container_index"),
    ).drop_nulls(["uuid", "namespace", "pod", "container_index"])
    values = matrix.samples.filter(pl.col("value").is_finite() & (pl.col("value") >= 0))
    return values.join(series, on="sid").drop("sid")


def hami_card_uuids(frames: Iterable[pl.DataFrame], cards: Iterable[str]) -> set[str]:
    """Cards HAMi shares, seen in one chunk: named by a card series or by an allocation."""
    found = set(cards)
    for frame in frames:
        found.update(frame["uuid"].unique().to_list())
    return found


def mark_vgpu(gpus: pl.DataFrame, uuids: set[str]) -> pl.DataFrame:
    """`gpus` with HAMi's cards (`uuids`) as `vgpu` cards (not time-sliced or exclusive: HAMi
    says so, whatever the dcgm series looked like) and no replica count of their own."""
    if not uuids or gpus.is_empty():
        return gpus
    hami = pl.col("uuid").is_in(list(uuids))
    return gpus.with_columns(
        pl.when(hami).then(pl.lit("vgpu")).otherwise(pl.col("sharing_mode")).alias("sharing_mode"),
        pl.when(hami).then(pl.lit(None, pl.Int32)).otherwise(pl.col("replicas")).alias("replicas"),
    )
