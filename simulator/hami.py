"""HAMi's shapes for the simulated vGPU pools: what a real HAMi cluster publishes, nothing more.

Written from the upstream sources cited in tests/fixtures/planes/SOURCES.md (hami/), never from
what gpuledger reads:

1. Requests (`nvidia.com/gpu` 1 and the pod's cut of the card) in all four of HAMi's forms,
   taken in turn by pod number: `gpumem` + `gpucores`, `gpumem-percentage` + `gpucores`,
   `gpumem` alone, `gpumem-percentage` alone. What HAMi then enforces (the allocation
   annotation and the scheduler's series): memory in MiB (a percentage converted
   `devmem * pct / 100`, integer as HAMi computes it), cores in % (0 when not asked: no core
   limit). A slot's fraction is whole percent of the card, so every form gives the slot's share
   (`max(cores/100, MiB/devmem)`, the cut HAMi keeps for the pod).
2. Nodes: the register annotation `hami.io/node-nvidia-register` (the current JSON form, zero
   fields omitted) and the handshake; capacity `nvidia.com/gpu` = cards x `deviceSplitCount`
   and nothing else (no `nvidia.com/gpumem`/`gpucores`: the chart marks them
   `ignoredByScheduler`). `gpu=on` stays (the chart's default node selector, an admin's label).
3. Pods: `schedulerName: hami-scheduler` and the annotations of `devices.go` /
   `util/types.go` after the device plugin allocated (`vgpu-devices-to-allocate: ;`).
4. The scheduler's `:31993` series (`cmd/scheduler/metrics.go`, labels sorted, `zone="vGPU"`):
   per card `hami_gpu_memory_limit_bytes`, `hami_gpu_core_limit_ratio`,
   `hami_gpu_memory_allocated_bytes`, `hami_gpu_core_allocated_ratio`, `hami_gpu_shared_count`
   while the card is present; per container device `hami_vgpu_memory_allocated_bytes` and
   `hami_vgpu_core_allocated_ratio` while the pod runs.
dcgm-exporter gives such a card one series without pod labels (`samples`): that is the
simulator's part of "what HAMi does not publish".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from gpuledger.simulator.fleet import MODEL_FACTS
from gpuledger.simulator.hardware import presence_steps
from gpuledger.simulator.timebase import expand_steps

if TYPE_CHECKING:
    from gpuledger.simulator.hardware import Hardware, Slot
    from gpuledger.simulator.simulated_fleet import SimulatedFleet
    from gpuledger.simulator.timebase import Timebase
    from gpuledger.simulator.workloads import Schedule

DEVICE_SPLIT_COUNT = 10
"""HAMi's default `deviceSplitCount`: `nvidia.com/gpu` capacity per card."""
MIB = 1024 * 1024
SCHEDULER_FAMILIES: tuple[tuple[str, str], ...] = (
    ("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU"),
    ("hami_gpu_core_limit_ratio", "Device core limit for a certain GPU"),
    ("hami_gpu_memory_allocated_bytes", "Device memory allocated for a certain GPU"),
    ("hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU"),
    ("hami_gpu_shared_count", "Number of containers sharing this GPU"),
    ("hami_vgpu_memory_allocated_bytes", "vGPU memory allocated from a container"),
    ("hami_vgpu_core_allocated_ratio", "vGPU core allocated from a container"),
)
"""(name, HELP) of the scheduler families emitted, as `metrics.go` describes them."""


def devmem_mib(memory_mib: float) -> int:
    """HAMi's `devmem` of a card: NVML's total memory in MiB."""
    return int(memory_mib)


def hami_request(pod_id: int, slot: Slot, memory_mib: float) -> tuple[dict[str, int], tuple[int, int]]:
    """A vGPU pod's requests (form by pod number, step 1) and what HAMi allocates (MiB, cores)."""
    total = devmem_mib(memory_mib)
    pct = round(slot.share * 100)
    by_mib = total * pct // 100
    form = pod_id % 4
    requests: dict[str, int] = {"nvidia.com/gpu": 1}
    if form in (0, 2):
        requests["nvidia.com/gpumem"] = by_mib
    else:
        requests["nvidia.com/gpumem-percentage"] = pct
    if form in (0, 1):
        requests["nvidia.com/gpucores"] = pct
    return requests, (by_mib, pct if form in (0, 1) else 0)


def device_type(model: str) -> str:
    """The register annotation's `type`: the NVML name, `NVIDIA-` prefixed only when it does not
    start with NVIDIA."""
    name = str(MODEL_FACTS[model]["model_name"])
    return name if name.startswith("NVIDIA") else f"NVIDIA-{name}"


def register_annotation(hw: Hardware, n_idx: int, k: int, spans: list[tuple[int, int]]) -> str:
    """`hami.io/node-nvidia-register` of a node at step `k` (JSON, `omitempty` fields dropped):
    the cards present then (`spans`: `presence_steps`; replacements and churn follow them)."""
    node = hw.nodes[n_idx]
    devices = []
    for g in sorted(node.gpus + node.replacements, key=lambda g: hw.gpus[g].index):
        if not spans[g][0] <= k < spans[g][1]:
            continue
        gpu = hw.gpus[g]
        item: dict[str, Any] = {"id": gpu.uuid}
        if gpu.index:
            item["index"] = gpu.index
        item.update({"count": DEVICE_SPLIT_COUNT, "devmem": devmem_mib(gpu.memory_mib), "devcore": 100,
                     "type": device_type(gpu.model), "mode": "hami-core", "health": True})
        devices.append(item)
    return json.dumps(devices, separators=(",", ":"))


def node_annotations(hw: Hardware, n_idx: int, k: int, spans: list[tuple[int, int]],
                     at_text: str) -> dict[str, str]:
    """A vGPU node's HAMi annotations at step `k` (`at_text`: `time.DateTime` of the handshake)."""
    return {"hami.io/node-handshake": f"Requesting_{at_text}",
            "hami.io/node-nvidia-register": register_annotation(hw, n_idx, k, spans)}


def pod_annotations(uuid: str, allocated: tuple[int, int], node: str, bind_s: int) -> dict[str, str]:
    """The annotations of a pod HAMi placed and its device plugin allocated (step 3)."""
    mem, cores = allocated
    return {
        "hami.io/bind-phase": "success", "hami.io/bind-time": str(bind_s),
        "hami.io/vgpu-devices-allocated": f"{uuid},NVIDIA,{mem},{cores}:;",
        "hami.io/vgpu-devices-to-allocate": ";", "hami.io/vgpu-node": node,
        "hami.io/vgpu-time": str(bind_s),
    }


def pod_cards(sched: Schedule, hw: Hardware) -> np.ndarray:
    """Per pod, the card (gpu index) of its first allocation, -1 when it has none."""
    out = np.full(len(sched.pods), -1, dtype=np.int64)
    first = np.unique(sched.alloc_pod[::-1], return_index=True)
    pods, at = first[0], len(sched.alloc_pod) - 1 - first[1]
    slot_gpu = np.array([s.gpu for s in hw.slots], dtype=np.int64)
    out[pods] = slot_gpu[sched.alloc_slot[at]]
    return out


# The scheduler's series ----------------------------------------------------------------
@dataclass(frozen=True)
class SchedulerSeries:
    """Label strings and values of the scheduler's series, built once per simulation."""

    card: np.ndarray
    """Per vGPU card series: its gpu index."""
    card_labels: list[str]
    """Per card: `device_index,device_type,device_uuid,node` label text (no zone)."""
    card_spans: np.ndarray
    """Per card: [first, end) step present."""
    devmem: np.ndarray
    pod: np.ndarray
    """Per vGPU pod series: its pod id."""
    pod_labels: list[str]
    pod_card: np.ndarray
    """Per pod series: the index into `card` of its card."""
    pod_mem: np.ndarray
    pod_cores: np.ndarray

    @classmethod
    def of(cls, sim: SimulatedFleet) -> SchedulerSeries:
        hw, sched, tenants = sim.hw, sim.schedule, sim.tenants
        spans = presence_steps(hw, sim.tb)
        cards = [g for g, gpu in enumerate(hw.gpus) if gpu.sharing == "vgpu"]
        where = {g: i for i, g in enumerate(cards)}
        labels = [
            f'device_index="{hw.gpus[g].index}",device_type="{device_type(hw.gpus[g].model)}",'
            f'device_uuid="{hw.gpus[g].uuid}",node="{hw.nodes[hw.gpus[g].node].name}"' for g in cards
        ]
        on_card = pod_cards(sched, hw)
        pods = [p for p in range(len(sched.pods)) if sched.pods.hami[p] is not None and on_card[p] in where]
        pod_labels = [
            f'container_index="0",device_uuid="{hw.gpus[on_card[p]].uuid}",'
            f'namespace="{tenants.namespaces[sched.pods.namespace[p]].name}",'
            f'node="{hw.nodes[sched.pods.node[p]].name}",pod="{sched.pods.name[p]}"' for p in pods
        ]
        allocated = [sched.pods.hami[p] or (0, 0) for p in pods]
        return cls(
            card=np.array(cards, dtype=np.int64), card_labels=labels,
            card_spans=np.array([spans[g] for g in cards], dtype=np.int64).reshape(-1, 2),
            devmem=np.array([devmem_mib(hw.gpus[g].memory_mib) for g in cards], dtype=np.float64),
            pod=np.array(pods, dtype=np.int64), pod_labels=pod_labels,
            pod_card=np.array([where[on_card[p]] for p in pods], dtype=np.int64),
            pod_mem=np.array([a[0] for a in allocated], dtype=np.float64),
            pod_cores=np.array([a[1] for a in allocated], dtype=np.float64),
        )

    def lines(
        self, sched: Schedule, k0: int, k1: int, *, ts: Callable[[np.ndarray], pl.Series],
        kept: Callable[..., tuple[np.ndarray, ...]], want: set[str],
    ) -> dict[str, pl.Series]:
        """Sample lines of steps `[k0, k1)` per family; `ts(k)` renders the timestamps of steps,
        `kept(ids, k)` thins them to the scrape interval."""
        names = {name for name, _ in SCHEDULER_FAMILIES} & want
        if not names or not self.card.size:
            return {}
        start = np.maximum(sched.pod_start[self.pod], 0)
        end = np.array(sched.pods.end, dtype=np.int64)[self.pod]
        live = np.nonzero((start < k1) & (end > k0))[0]
        entry, k = kept(*expand_steps(live, np.maximum(start[live], k0), np.minimum(end[live], k1)))
        c_live = np.nonzero((self.card_spans[:, 0] < k1) & (self.card_spans[:, 1] > k0))[0]
        card, ck = kept(*expand_steps(c_live, np.maximum(self.card_spans[c_live, 0], k0),
                                      np.minimum(self.card_spans[c_live, 1], k1)))
        width = k1 - k0
        sums = []
        for amount in (self.pod_mem[entry], self.pod_cores[entry], np.ones(entry.size)):
            grid = np.zeros((len(self.card), width))
            np.add.at(grid, (self.pod_card[entry], k - k0), amount)
            sums.append(grid[card, ck - k0])
        card_values = {
            "hami_gpu_memory_limit_bytes": self.devmem[card] * MIB,
            "hami_gpu_core_limit_ratio": np.full(card.size, 100.0),
            "hami_gpu_memory_allocated_bytes": sums[0] * MIB,
            "hami_gpu_core_allocated_ratio": np.ceil(sums[1]),
            "hami_gpu_shared_count": sums[2],
        }
        out: dict[str, pl.Series] = {}
        card_text = pl.Series(self.card_labels, dtype=pl.String)
        pod_text = pl.Series(self.pod_labels, dtype=pl.String)
        for name in names:
            if name in card_values:
                labels = card_text.gather(card)
                if name == "hami_gpu_memory_allocated_bytes":
                    labels = 'device_cores="100",' + labels
                out[name] = _render(name, labels, card_values[name], ts(ck))
            else:
                values = self.pod_mem[entry] * MIB if "memory" in name else self.pod_cores[entry]
                out[name] = _render(name, pod_text.gather(entry), values, ts(k))
        return out


def _render(metric: str, labels: pl.Series, values: np.ndarray, ts: pl.Series) -> pl.Series:
    """`metric{labels,zone="vGPU"} value ts` (the zone label sorts last of these)."""
    return pl.DataFrame({"l": labels, "v": pl.Series(values, dtype=pl.Float64), "t": ts}).select(
        pl.concat_str([pl.lit(metric + "{"), pl.col("l"), pl.lit(',zone="vGPU"} '),
                       pl.col("v").cast(pl.String), pl.col("t")])
    ).to_series()


def vgpu_allocations(hw: Hardware, sched: Schedule, tenants: Any, tb: Timebase) -> dict[str, list[Any]]:
    """The rows the Kubernetes collector would store from the pods' allocation annotations
    (source `api`): each vGPU pod's device, its lifetime clipped to the window."""
    on_card = pod_cards(sched, hw)
    pods = sched.pods
    rows: dict[str, list[Any]] = {c: [] for c in (
        "uuid", "namespace", "pod", "container_index", "source", "node", "mem_mib", "cores_pct",
        "card_mem_mib", "start_ts", "end_ts")}
    for p in range(len(pods)):
        allocated = pods.hami[p]
        lo, hi = max(pods.start[p], 0), min(pods.end[p], tb.steps)
        if allocated is None or on_card[p] < 0 or lo >= hi:
            continue
        gpu = hw.gpus[on_card[p]]
        for column, value in (
            ("uuid", gpu.uuid), ("namespace", tenants.namespaces[pods.namespace[p]].name),
            ("pod", pods.name[p]), ("container_index", 0), ("source", "api"),
            ("node", hw.nodes[pods.node[p]].name), ("mem_mib", float(allocated[0])),
            ("cores_pct", float(allocated[1])), ("card_mem_mib", float(devmem_mib(gpu.memory_mib))),
            ("start_ts", tb.at(lo)), ("end_ts", tb.at(hi)),
        ):
            rows[column].append(value)
    return rows
