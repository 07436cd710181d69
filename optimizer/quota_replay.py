"""Replay recorded demand against a set of quotas: pending GPU-minutes and idle quota.

A small fluid admission simulator, per pool of capacity (cohort, flavor, resource), at the
history's sampling step:

1. Work that is running keeps running while its queue still demands it (Kueue's default
   ClusterQueue preemption is `Never`); finished work leaves.
2. Each queue admits pending work within its own nominal quota, oldest first (FIFO per
   queue: in a fluid model that only orders who waits inside a queue), as long as the
   cohort has free capacity (borrowers may be holding it).
3. Queues still pending borrow from the cohort's unused lendable quota (each lender's unused
   nominal, at most its lending limit), each at most its borrowing limit above its nominal,
   shared in proportion to fair-sharing weights (water-filling).
4. Pending GPU-minutes = demand not running × step; idle quota = nominal quota that no
   running work uses × step.

`borrowing=False` replays hard quotas (no cohort sharing): each queue runs at most its nominal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from optimizer.quota_input import Quota, QuotaInputs

QuotaSet = Mapping[tuple[str, str, str], Quota]
"""(cluster_queue, flavor, resource) → quota."""


@dataclass(frozen=True)
class ReplayResult:
    pending_gpu_minutes: float
    idle_quota_gpu_minutes: float
    demand_gpu_minutes: float
    per_queue_pending: dict[str, float]


def replay(inputs: QuotaInputs, quotas: QuotaSet, *, borrowing: bool = True,
           history: pl.DataFrame | None = None) -> ReplayResult:
    """Replay `history` (default: the inputs' history) against `quotas` (steps 1-4 above)."""
    frame = inputs.history if history is None else history
    step_min = inputs.step.total_seconds() / 60
    queues = {q.name: q for q in inputs.queues}
    pending_total = idle_total = demand_total = 0.0
    per_queue: dict[str, float] = {}
    pools: dict[tuple[str, str, str], list[str]] = {}
    for q in inputs.queues:
        for f, r in q.quotas:
            pools.setdefault((q.pool, f, r), []).append(q.name)
    times = frame["ts"].unique().sort()
    index = {t: i for i, t in enumerate(times.to_list())}
    for (pool, f, r), names in sorted(pools.items()):
        sub = frame.filter((pl.col("flavor") == f) & (pl.col("resource") == r)
                           & pl.col("cluster_queue").is_in(names))
        demand = np.zeros((len(times), len(names)))
        col = {n: i for i, n in enumerate(names)}
        if sub.height:
            rows = np.array([index[t] for t in sub["ts"].to_list()], dtype=np.int64)
            cols = np.array([col[n] for n in sub["cluster_queue"].to_list()], dtype=np.int64)
            np.add.at(demand, (rows, cols), sub["demand"].to_numpy())
        nominal = np.array([_q(quotas, n, f, r).nominal for n in names])
        weights = np.array([max(queues[n].weight, 1e-9) for n in names])
        if borrowing and not pool.startswith("(no cohort"):
            borrow = np.array([_limit(_q(quotas, n, f, r).borrowing_limit) for n in names])
            lend = np.array([min(_limit(_q(quotas, n, f, r).lending_limit), nominal[i])
                             for i, n in enumerate(names)])
        else:
            borrow = np.zeros(len(names))
            lend = np.zeros(len(names))
        pending, idle = _simulate(demand, nominal, borrow, lend, weights)
        pending_total += float(pending.sum()) * step_min
        idle_total += float(idle.sum()) * step_min
        demand_total += float(demand.sum()) * step_min
        for n, v in zip(names, pending.sum(axis=0), strict=True):
            per_queue[n] = per_queue.get(n, 0.0) + float(v) * step_min
    return ReplayResult(pending_total, idle_total, demand_total, per_queue)


def _q(quotas: QuotaSet, queue: str, flavor: str, resource: str) -> Quota:
    return quotas.get((queue, flavor, resource), Quota(0.0))


def _limit(value: float | None) -> float:
    return float("inf") if value is None else value


def _simulate(demand: np.ndarray, nominal: np.ndarray, borrow: np.ndarray, lend: np.ndarray,
              weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step and queue: pending amount; per step: idle nominal quota."""
    steps, n = demand.shape
    capacity = float(nominal.sum())
    running = np.zeros(n)
    pending = np.zeros((steps, n))
    idle = np.zeros(steps)
    eps = 1e-9
    for t in range(steps):
        d = demand[t]
        running = np.minimum(running, d)                                   # 1. finished work leaves
        free = capacity - running.sum()
        own = np.minimum(d - running, np.maximum(0.0, nominal - running))  # 2. own nominal first
        if own.sum() > free + eps:
            own *= max(0.0, free) / own.sum()
        running = running + own
        want = np.minimum(d - running, np.maximum(0.0, borrow - np.maximum(0.0, running - nominal)))
        lendable = np.minimum(lend, np.maximum(0.0, nominal - running)).sum()
        borrowed = np.maximum(0.0, running - nominal).sum()
        available = min(lendable - borrowed, capacity - running.sum())
        if available > eps and want.sum() > eps:                           # 3. borrow by weight
            running = running + _water_fill(want, weights, available)
        pending[t] = np.maximum(0.0, d - running)                         # 4. measure
        idle[t] = max(0.0, capacity - running.sum())
    return pending, idle


def _water_fill(want: np.ndarray, weights: np.ndarray, amount: float) -> np.ndarray:
    """Share `amount` in proportion to weights, never giving a queue more than it wants."""
    give = np.zeros_like(want)
    active = want > 1e-12
    left = amount
    while left > 1e-9 and active.any():
        share = left * np.where(active, weights, 0.0) / weights[active].sum()
        step = np.minimum(share, want - give)
        give += step
        left -= float(step.sum())
        active = active & (want - give > 1e-12)
    return give
