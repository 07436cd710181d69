"""The product's quota model beside the twin: pending GPU-minutes per queue, on the same window.

What the model is fed is what it is fed in production: a demand history, one sample per minute and
(queue, flavor, resource) of admitted + pending amounts, as gpuledger's collector records
`queue_samples` from a cluster. Here the cluster is the twin: `sampled()` reads that series off the
replay's watched events, sampling each simulated minute at its middle (m + 0.5, away from the whole-
minute arrivals); a workload's flavor is the one it is pinned to, else its queue's first flavor
covering its resource (the model has no flavor fungibility: it places demand where it is recorded).
What ran (demand - pending) is fed beside it, as production reads `queue_samples.usage`, so the
model starts from what the twin ran at the first sample (decision 0251). `model_pending()` replays
the series through `gpuledger.optimizer.quota.replay` (the model on mean demand: cohort borrowing
by water-filling per flavor and resource, by the queues' fair-sharing weights, 1 where unset; a
queue whose `reclaimWithinCohort` is Any takes its nominal back from borrowers, other preemption
is not modelled; each queue admits whole units of its smallest workload, as production reads the
smallest pod request, decision 0249) at a one-minute resolution under the window's quotas, one
resource at a time (whole GPUs and each MIG profile are different units). The twin's own figure,
sampled the same way, is the amount created and not admitted at each sample x 1 minute; `compare()`
puts both side by side per queue (whole GPUs) and per queue and MIG profile, with the gap in
percent of the twin's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.queues import request_sizes
from gpuledger.optimizer.quota.replay import replay as model_replay
from gpuledger.optimizer.quota.spec import GPU, Quota, default_capacity
from gpuledger.optimizer.quota.spec import QueueSpec as ModelQueue

if TYPE_CHECKING:
    from tools.twin.replay import ReplayResult, Window

FLAVOR = "twin"
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=1)


Series = dict[tuple[int, str, str, str], float]
"""Amount per (simulated minute, ClusterQueue, flavor, resource)."""


def _keys(window: Window) -> dict[str, tuple[str, str]]:
    """Workload -> (flavor, resource) it is counted in (module docstring)."""
    out = {}
    for w in window.workloads:
        queue = next(q for q in window.queues if q.name == w.queue)
        first = next(x.flavor for x in queue.flavor_quotas(FLAVOR) if x.resource == w.resource)
        out[w.name] = (w.flavor or first, w.resource)
    return out


def sampled(result: ReplayResult, window: Window, minutes: int) -> tuple[Series, Series]:
    """(demand, pending) per (minute, queue, flavor, resource), sampled at minute + 0.5 from the
    watched events.

    Demand = amount of Jobs created and not finished; pending = amount of Jobs created and not
    admitted (a preempted Job is pending again until its next admission)."""
    keys = _keys(window)
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
            key = (m, facts.queue, *keys[job])
            demand[key] += facts.gpus
            if not past or past[-1] == "preempted":
                pending[key] += facts.gpus
    return dict(demand), dict(pending)


def model_pending(window: Window, demand: Series, minutes: int, resource: str = GPU, *,
                  whole: bool = True, pending: Series | None = None) -> dict[str, float]:
    """Pending minutes of `resource` per queue by the product's quota replay, fed `demand`;
    `whole=False` replays every queue fluidly (the model before decision 0249). Given the
    twin's sampled `pending`, the model also reads what ran (demand - pending), as production
    reads `queue_samples.usage`, and starts from what ran at the first sample (decision 0251);
    else it starts from nothing running."""
    quotas = {q.name: [x for x in q.flavor_quotas(FLAVOR) if x.resource == resource] for q in window.queues}
    # the smallest request, by the rule production reads the pods with (one workload, one pod)
    units = request_sizes(((w.queue, json.dumps({w.resource: w.gpus}), 1) for w in window.workloads),
                          lambda _: True).smallest
    weight = {q.name: 1.0 if q.weight is None else q.weight for q in window.queues}
    queues = tuple(ModelQueue(q.name, q.cohort, weight[q.name], {(x.flavor, resource): Quota(
        float(x.nominal), None if x.borrowing_limit is None else float(x.borrowing_limit),
        None if x.lending_limit is None else float(x.lending_limit)) for x in quotas[q.name]}, (),
        reclaims=q.reclaim_within_cohort == "Any", units=units.get(q.name, {}) if whole else {})
        for q in window.queues if quotas[q.name])
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "ts": pl.Datetime("us", "UTC"), "cluster_queue": pl.String, "flavor": pl.String,
        "resource": pl.String, "demand": pl.Float64}
    if pending is not None:
        schema["running"] = pl.Float64

    def row(m: int, name: str, flavor: str) -> dict[str, Any]:
        key = (m, name, flavor, resource)
        wanted = demand.get(key, 0.0)
        cell: dict[str, Any] = {"ts": ORIGIN + m * STEP, "cluster_queue": name, "flavor": flavor,
                                "resource": resource, "demand": wanted}
        if pending is not None:
            cell["running"] = wanted - pending.get(key, 0.0)
        return cell

    rows = [row(m, q.name, flavor) for m in range(minutes) for q in queues for flavor, _ in q.quotas]
    history = pl.DataFrame(rows, schema=schema)
    inputs = QuotaInputs(queues, default_capacity(queues), history, STEP, source="twin")
    result = model_replay(inputs, {(q.name, *key): quota for q in queues for key, quota in q.quotas.items()},
                          resolution=STEP)
    return {q.name: round(result.per_queue_pending.get(q.name, 0.0), 2) for q in queues}


def compare(result: ReplayResult, window: Window) -> dict[str, Any]:
    """Per queue (whole GPUs; `queue resource` for a MIG profile) that had demand: the twin's
    pending minutes (sampled; for whole GPUs also watched continuously), the model's, the gap
    (model - twin) in percent of the twin's sampled figure, and the fluid model's figure beside."""
    minutes = int((result.end - result.t0) / result.seconds_per_minute) + 1
    demand, pending = sampled(result, window, minutes)
    out: dict[str, Any] = {}
    for resource in sorted({k[3] for k in demand}, key=lambda r: (r != GPU, r)):
        model = model_pending(window, demand, minutes, resource, pending=pending)
        fluid = model_pending(window, demand, minutes, resource, whole=False, pending=pending)
        for q in window.queues:
            if not any(k[1] == q.name and k[3] == resource for k in demand):
                continue
            twin = sum(v for k, v in pending.items() if k[1] == q.name and k[3] == resource)
            gap = None if twin == 0 else round(100 * (model[q.name] - twin) / twin, 1)
            row = {"twin_pending_gpu_min": twin, "model_pending_gpu_min": model[q.name], "gap_pct": gap,
                   "model_fluid_pending_gpu_min": fluid[q.name]}
            if resource == GPU:
                row["twin_pending_watched_gpu_min"] = result.per_queue[q.name].pending_gpu_minutes
            out[q.name if resource == GPU else f"{q.name} {resource}"] = row
    return out
