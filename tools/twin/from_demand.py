"""A twin window cut from a demand history that has no workloads: the synthetic quota bench's.

Issue 36 step 3 asks for the model's gap on the synthetic quota bench as well as on the demo
month. That bench (`optimizer.quota.synthetic`) is a demand series per (team, flavor) on 15-minute
buckets and the teams' ClusterQueues; it records no workloads. `window_from_demand` turns it
into one the twin can replay, by the simplest reading that keeps the series:
- each bucket's demand, rounded to whole GPUs, is that many one-GPU workloads alive in it; the
  k-th GPU of a series is one workload for as long as the level stays above k (so a level that
  rises adds arrivals at the bucket's start, one that falls ends the newest workloads first);
  a workload alive at the window's end runs on to it;
- each workload is pinned to its series' flavor (nodeSelector = the flavor's node label), as the
  model places demand where it is recorded;
- each flavor's nodes carry its capacity in nodes of `node_gpus` whole GPUs;
- the queues keep their nominal quotas and borrowing limits per flavor, in their cohort, or each
  alone (`borrowing=False`, the plan headline's "under contention").
What the replay then does is Kueue's: a workload that waits runs its minutes once admitted, so the
demand the twin produces is not the series; the model is fed the twin's sampled demand, as in
decision 0235, so both sides see the same window. The queues keep their fair-sharing weights;
they split a cohort's borrowing on the twin only where its Kueue runs with fair sharing
(`Twin.start_kueue(fair_sharing=True)`), as the model always splits it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import groupby

import numpy as np

from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.spec import GPU
from gpuledger.optimizer.quota.spec import QueueSpec as ModelQueue
from tools.twin.flavors import Flavor, FlavorQuota
from tools.twin.from_warehouse import FLAVOR_LABEL
from tools.twin.replay import QueueSpec, Window, WorkloadSpec

MINUTE = timedelta(minutes=1)


def busiest_start(inputs: QuotaInputs, minutes: int, *, borrowing: bool) -> datetime:
    """The bucket start whose next `minutes` hold the most demand above what the quotas let run:
    per flavor above its capacity with borrowing, per queue above its nominal without."""
    demand = inputs.demand
    zero = np.zeros(demand.buckets)
    over = zero.copy()
    for f in sorted({f for q in inputs.queues for f, _ in q.quotas}):
        levels = {q.name: demand.column((q.name, f, GPU)) for q in inputs.queues if (f, GPU) in q.quotas}
        nominal = {q.name: q.quotas[(f, GPU)].nominal for q in inputs.queues if (f, GPU) in q.quotas}
        if borrowing:
            capacity = sum(nominal.values())
            over += np.maximum(sum(levels.values(), zero) - capacity, 0.0)
        else:
            over += sum((np.maximum(v - nominal[n], 0.0) for n, v in levels.items()), zero)
    span = max(1, -(-minutes * MINUTE // demand.step))
    totals = np.convolve(over, np.ones(span), mode="valid")
    return demand.start + int(np.argmax(totals)) * demand.step


def window_from_demand(inputs: QuotaInputs, start: datetime, minutes: int, *, borrowing: bool = True,
                       node_gpus: int = 8) -> Window:
    """The module docstring's window of `minutes` from `start` (a bucket start of the history)."""
    demand = inputs.demand
    first = demand.row_of(start)
    per_minute = [first + (m * MINUTE) // demand.step for m in range(minutes)]
    flavors = sorted({f for q in inputs.queues for f, _ in q.quotas})
    queues = tuple(_queue(q, borrowing) for q in inputs.queues)
    workloads = []
    for q in inputs.queues:
        for f, r in q.quotas:
            column = demand.column((q.name, f, r))
            levels = [round(float(column[min(i, demand.buckets - 1)])) for i in per_minute]
            workloads += _workloads(f"{q.name}-{f}", q.name, f, levels)
    capacity = {f: sum(x.nominal for q in queues for x in q.quotas if x.flavor == f) for f in flavors}
    return Window(queues, (), tuple(workloads),
                  tuple(Flavor(f, {FLAVOR_LABEL: f}, _nodes(capacity[f], node_gpus)) for f in flavors))


def _queue(q: ModelQueue, borrowing: bool) -> QueueSpec:
    """The twin's ClusterQueue of a planning-model queue: integer quotas, in its cohort or alone."""
    quotas = tuple(FlavorQuota.of(f, r, x, borrowing=borrowing) for (f, r), x in q.quotas.items())
    return QueueSpec(q.name, sum(x.nominal for x in quotas), q.cohort if borrowing else None,
                     quotas=quotas, weight=q.weight)


def _nodes(gpus: int, per_node: int) -> tuple[dict[str, int], ...]:
    """`gpus` whole GPUs in nodes of `per_node`, the last one holding the rest."""
    sizes = [per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else [])
    return tuple({GPU: n} for n in sizes)


def _workloads(prefix: str, queue: str, flavor: str, levels: list[int]) -> list[WorkloadSpec]:
    """One-GPU workloads of one series: the k-th GPU is one workload while the level exceeds k."""
    out = []
    for k in range(max(levels, default=0)):
        m = 0
        for alive, run in groupby(level > k for level in levels):
            n = len(list(run))
            if alive:
                out.append(WorkloadSpec(f"{prefix}-g{k}-m{m}", float(m), 1, queue, float(n), flavor=flavor))
            m += n
    return out
