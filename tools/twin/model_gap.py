"""The product's quota model beside the twin: pending GPU-minutes per queue, on the same window.

What the model is fed is what it is fed in production: a demand history, one sample per minute and
queue of admitted + pending GPUs, as gpuledger's collector records `queue_samples` from a cluster.
Here the cluster is the twin: `sampled()` reads that series off the replay's watched events, sampling
each simulated minute at its middle (m + 0.5, away from the whole-minute arrivals), and
`model_pending()` replays it through `gpuledger.optimizer.quota.replay` (the fluid model: cohort
borrowing by water-filling, preemption Never) at a one-minute resolution under the window's quotas.
The twin's own figure, sampled the same way, is GPUs created and not admitted at each sample x 1
minute; `compare()` puts both side by side with the gap in percent of the twin's.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.replay import replay as model_replay
from gpuledger.optimizer.quota.spec import GPU, Quota, default_capacity
from gpuledger.optimizer.quota.spec import QueueSpec as ModelQueue

if TYPE_CHECKING:
    from tools.twin.replay import ReplayResult, Window

FLAVOR = "twin"
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=1)


Series = dict[tuple[int, str], float]
"""GPUs per (simulated minute, ClusterQueue)."""


def sampled(result: ReplayResult, minutes: int) -> tuple[Series, Series]:
    """(demand, pending) GPUs per (minute, queue), sampled at minute + 0.5 from the watched events.

    Demand = GPUs of Jobs created and not finished; pending = GPUs of Jobs created and not admitted
    (a preempted Job is pending again until its next admission)."""
    created = {j: (f.created_at - result.t0) / result.seconds_per_minute for j, f in result.jobs.items()}
    spans: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for e in result.events:
        if e.job in result.jobs and e.what in ("admitted", "preempted", "finished"):
            spans[e.job].append((e.what, result.minute(e)))
    demand: Series = defaultdict(float)
    pending: Series = defaultdict(float)
    for m in range(minutes):
        at = m + 0.5
        for job, facts in result.jobs.items():
            if created[job] > at:
                continue
            past = [what for what, when in spans[job] if when <= at]
            if "finished" in past:
                continue
            demand[(m, facts.queue)] += facts.gpus
            if not past or past[-1] == "preempted":
                pending[(m, facts.queue)] += facts.gpus
    return dict(demand), dict(pending)


def model_pending(window: Window, demand: Series, minutes: int) -> dict[str, float]:
    """Pending GPU-minutes per queue by the product's quota replay, fed `demand` per minute."""
    queues = tuple(ModelQueue(q.name, q.cohort, 1.0, {(FLAVOR, GPU): Quota(
        float(q.nominal_gpus),
        None if q.borrowing_limit is None else float(q.borrowing_limit),
        None if q.lending_limit is None else float(q.lending_limit))}, ()) for q in window.queues)
    rows = [{"ts": ORIGIN + m * STEP, "cluster_queue": q.name, "flavor": FLAVOR, "resource": GPU,
             "demand": demand.get((m, q.name), 0.0)} for m in range(minutes) for q in window.queues]
    history = pl.DataFrame(rows, schema={"ts": pl.Datetime("us", "UTC"), "cluster_queue": pl.String,
                                         "flavor": pl.String, "resource": pl.String, "demand": pl.Float64})
    inputs = QuotaInputs(queues, default_capacity(queues), history, STEP, source="twin")
    quotas = {(q.name, FLAVOR, GPU): q.quotas[(FLAVOR, GPU)] for q in queues}
    result = model_replay(inputs, quotas, resolution=STEP)
    return {q.name: round(result.per_queue_pending.get(q.name, 0.0), 2) for q in window.queues}


def compare(result: ReplayResult, window: Window) -> dict[str, Any]:
    """Per queue: the twin's pending GPU-minutes (sampled, and watched continuously), the model's,
    and the gap (model - twin) in percent of the twin's sampled figure."""
    minutes = int((result.end - result.t0) / result.seconds_per_minute) + 1
    demand, pending = sampled(result, minutes)
    model = model_pending(window, demand, minutes)
    out: dict[str, Any] = {}
    for q in window.queues:
        twin = sum(v for (_, name), v in pending.items() if name == q.name)
        gap = None if twin == 0 else round(100 * (model[q.name] - twin) / twin, 1)
        out[q.name] = {"twin_pending_gpu_min": twin, "model_pending_gpu_min": model[q.name],
                       "twin_pending_watched_gpu_min": result.per_queue[q.name].pending_gpu_minutes,
                       "gap_pct": gap}
    return out
