"""The Volcano scheduler's queue metrics in the simulated fleet (`volcano_queue_*`), with truth.

Why: a Volcano quota plan (`optimize quota --queue-system volcano`) reads demand from
`queue_samples` rows the Volcano collector builds from these series; without them the demo's
Volcano pool had Queues and PodGroups but no demand. The names and units are the ones
`collectors.queues._volcano_metrics` reads, as Volcano's scheduler exports them:
- `volcano_queue_allocated_scalar_resources{queue_name, resource="nvidia.com/gpu"}`: the GPUs
  (whole and MIG, as `simulator.volcano` counts them) of the queue's running pods, in
  milli-units (Volcano's unit for every scalar resource);
- `volcano_queue_deserved_scalar_resources{...}`: the Queue's `spec.deserved`, milli-units;
- `volcano_queue_pod_group_inqueue_count{queue_name}`: PodGroups with a member waiting to be
  bound (its admission wait before its start); `..._pending_count`: 0 (the simulator admits
  every gang to its queue at once, so none waits un-enqueued; the series exists, as Volcano's
  does).

Each pod counts for exactly one queue system: pods of a `queue_system: volcano` pool belong to a
PodGroup whose `spec.queue` names their Volcano Queue (`simulator.volcano`), so Volcano counts
them here and the Kueue model (`samples.QueueModel`) leaves them out (`volcano_pod`).

The truth is `VolcanoQueues.samples`, the frame the collector would store (flavor `default`,
whole GPUs); the simulator loads it into `queue_samples` beside Kueue's rows and renders the
series from it, so a test can hold the scraped-and-collected rows against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from gpuledger.core.frames import QUEUE_SAMPLES, polars_schema

if TYPE_CHECKING:
    from gpuledger.simulator.fleet import FleetSpec, PoolSpec
    from gpuledger.simulator.tenants import Tenants
    from gpuledger.simulator.timebase import Timebase
    from gpuledger.simulator.workloads import Schedule

FLAVOR = "default"
"""Volcano has no flavors; the collector and the optimizer name the one flavor so."""
RESOURCE = "nvidia.com/gpu"
MILLI = 1000.0
FAMILIES = ("volcano_queue_allocated_scalar_resources", "volcano_queue_deserved_scalar_resources",
            "volcano_queue_pod_group_pending_count", "volcano_queue_pod_group_inqueue_count")


def counted_gpus(requests: Mapping[str, int]) -> float:
    """The GPUs a pod asks for: whole cards plus MIG instances (one each)."""
    return float(sum(v for k, v in requests.items()
                     if k == "nvidia.com/gpu" or k.startswith("nvidia.com/mig-")))


def volcano_pod(pools: Sequence[PoolSpec], pool: int) -> bool:
    """Whether a pod of pool index `pool` is Volcano's (else Kueue's, when it names a queue)."""
    return pools[pool].queue_system == "volcano"


@dataclass(frozen=True)
class VolcanoQueues:
    """Per Volcano Queue its deserved GPUs; per pod its queue and GPUs; per PodGroup its queue."""

    names: list[str]
    deserved: np.ndarray
    pod_queue: np.ndarray
    """Queue index per pod, -1 for pods Volcano does not queue."""
    pod_gpus: np.ndarray
    pod_group: np.ndarray
    """PodGroup index per pod, -1 outside Volcano."""
    group_queue: np.ndarray

    @classmethod
    def of(cls, spec: FleetSpec, tenants: Tenants, sched: Schedule, deserved: Mapping[str, float]
           ) -> VolcanoQueues:
        """From the schedule's pods and each Volcano Queue's deserved GPUs (the Queue objects
        `simulator.volcano` builds: the engine passes `volcano.queue_deserved`)."""
        names = sorted(deserved)
        index = {n: i for i, n in enumerate(names)}
        pods = sched.pods
        pod_queue = np.full(len(pods), -1, dtype=np.int64)
        pod_group = np.full(len(pods), -1, dtype=np.int64)
        groups: dict[tuple[str, str], int] = {}
        group_queue: list[int] = []
        for p in range(len(pods)):
            if not (volcano_pod(spec.pools, pods.pool[p]) and pods.queue[p]):
                continue
            pod_queue[p] = index[str(pods.queue[p])]
            key = (tenants.namespaces[pods.namespace[p]].name, pods.owner_name[p])
            if key not in groups:
                groups[key] = len(groups)
                group_queue.append(int(pod_queue[p]))
            pod_group[p] = groups[key]
        gpus = np.array([counted_gpus(r) for r in pods.requests], dtype=np.float64)
        return cls(names, np.array([deserved[n] for n in names], dtype=np.float64), pod_queue, gpus,
                   pod_group, np.array(group_queue, dtype=np.int64))

    def series(self, sched: Schedule, wait_steps: np.ndarray, k0: int, k1: int
               ) -> tuple[np.ndarray, np.ndarray]:
        """(allocated GPUs, waiting PodGroups) per queue and step of `[k0, k1)`."""
        width, n = k1 - k0, len(self.names)
        start, end = sched.pod_start, np.array(sched.pods.end, dtype=np.int64)
        p = np.nonzero(self.pod_queue >= 0)[0]
        usage = np.zeros((n, width + 1))
        a, b = np.clip(start[p] - k0, 0, width), np.clip(end[p] - k0, 0, width)
        keep = a < b
        np.add.at(usage, (self.pod_queue[p][keep], a[keep]), self.pod_gpus[p][keep])
        np.add.at(usage, (self.pod_queue[p][keep], b[keep]), -self.pod_gpus[p][keep])
        # Only the PodGroups with a pod waiting inside the chunk (a few of the month's):
        # the others add rows of zeros, so leaving them out changes no sum.
        a, b = np.clip(start[p] - wait_steps[p] - k0, 0, width), np.clip(start[p] - k0, 0, width)
        keep = a < b
        groups, row = np.unique(self.pod_group[p][keep], return_inverse=True)
        waiting = np.zeros((groups.size, width + 1))
        np.add.at(waiting, (row, a[keep]), 1.0)
        np.add.at(waiting, (row, b[keep]), -1.0)
        groups_waiting = (np.cumsum(waiting, axis=1)[:, :width] > 0.5).astype(np.float64)
        pending = np.zeros((n, width))
        np.add.at(pending, self.group_queue[groups], groups_waiting)
        return np.cumsum(usage, axis=1)[:, :width], pending

    def samples(self, sched: Schedule, wait_steps: np.ndarray, tb: Timebase, k0: int, k1: int
                ) -> pl.DataFrame:
        """`queue_samples` rows of the Volcano Queues for steps `[k0, k1)`, queue-major."""
        width, n = k1 - k0, len(self.names)
        usage, pending = self.series(sched, wait_steps, k0, k1)
        queue = np.repeat(np.arange(n), width)
        steps = np.tile(np.arange(k0, k1), n)
        return pl.DataFrame({
            "ts": pl.Series((tb.origin_s + steps * tb.step_s).astype(np.int64) * 1_000_000).cast(
                pl.Datetime("us", "UTC")),
            "cluster_queue": pl.Series(self.names, dtype=pl.String).gather(queue),
            "flavor": [FLAVOR] * (n * width), "resource": [RESOURCE] * (n * width),
            "nominal_quota": self.deserved[queue], "usage": usage.ravel(),
            "pending_workloads": pending.ravel(), "admission_wait_s": [None] * (n * width),
        }, schema=polars_schema(QUEUE_SAMPLES))

    def split(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """`queue_samples` rows as (Kueue's, Volcano's)."""
        mine = (pl.col("flavor") == FLAVOR) & pl.col("cluster_queue").is_in(self.names)
        return frame.filter(~mine), frame.filter(mine)


def volcano_lines(frame: pl.DataFrame, ts: pl.Expr, want: set[str]) -> dict[str, pl.Series]:
    """Sample lines of the `volcano_queue_*` families from Volcano's `queue_samples` rows."""
    frame = frame.sort("cluster_queue", "ts")
    queue = pl.lit('{queue_name="') + pl.col("cluster_queue")
    scalar = queue + pl.lit(f'",resource="{RESOURCE}"}} ')
    values = {
        FAMILIES[0]: (scalar, pl.col("usage") * MILLI),
        FAMILIES[1]: (scalar, pl.col("nominal_quota") * MILLI),
        FAMILIES[2]: (queue + pl.lit('"} '), pl.lit(0.0)),
        FAMILIES[3]: (queue + pl.lit('"} '), pl.col("pending_workloads")),
    }
    return {
        name: frame.select(pl.concat_str([pl.lit(name), labels, value.cast(pl.Float64).cast(pl.String), ts]))
        .to_series()
        for name, (labels, value) in values.items() if name in want
    }
