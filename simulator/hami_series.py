"""HAMi's scheduler series and its allocations as the API shows them, from the schedule.

Step 4 of `simulator.hami` (the `:31993` families of `cmd/scheduler/metrics.go`) and the rows the
Kubernetes collector stores from the pods' `hami.io/vgpu-devices-allocated` annotations; apart
from `simulator.hami` because they read the schedule (which imports `simulator.hami` for the
requests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from gpuledger.simulator.hami import MIB, SCHEDULER_FAMILIES, device_type, devmem_mib
from gpuledger.simulator.hardware import presence_steps
from gpuledger.simulator.timebase import expand_steps

if TYPE_CHECKING:
    from gpuledger.simulator.hardware import Hardware
    from gpuledger.simulator.simulated_fleet import SimulatedFleet
    from gpuledger.simulator.timebase import Timebase
    from gpuledger.simulator.workloads import Schedule


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
