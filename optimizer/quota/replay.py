"""Replay recorded demand against a set of quotas: pending GPU-minutes and idle quota.

A small admission simulator on mean demand (fluid, but for each queue's admission unit), per
pool of capacity (cohort, flavor, resource), at the history's sampling step:

1. Work that is running keeps running while its queue still demands it (Kueue's default
   ClusterQueue preemption is `Never`); finished work leaves. At the first step, what the history
   recorded running there (`Demand.opening`) is running, where the history records it; else
   nothing runs yet (decision 0251).
   1b. A queue that reclaims (`reclaimWithinCohort: Any`, `QueueSpec.reclaims`) and wants work
   within its own nominal quota that the free capacity cannot hold takes it back from the
   cohort's borrowers: each gives up running work above its nominal, in proportion to it, and
   the reclaimed capacity goes to the reclaiming queues first (decision 0246).
2. Each queue admits pending work within its own nominal quota, oldest first (FIFO per
   queue: in a fluid model that only orders who waits inside a queue), as long as the
   cohort has free capacity (borrowers may be holding it).
3. Queues still pending borrow from the cohort's unused lendable quota (each lender's unused
   nominal, at most its lending limit), each at most its borrowing limit above its nominal,
   shared in proportion to fair-sharing weights (water-filling).
   2-3b. A queue with an admission unit (`QueueSpec.units`: its smallest request per pod) takes
   what steps 2-3 offer it in whole units only, or all it still wants if that fits: Kueue
   admits a Workload whole or not at all. What a queue cannot use is offered again to the
   others; per pool, of the queues offered a share their next unit does not fit, the half
   furthest from fitting wait this step, until every share offered fits (decision 0249).
4. Pending GPU-minutes = demand not running × step; idle quota = nominal quota that no
   running work uses × step; borrowed quota = running work above its queue's nominal × step
   (how much the queues rely on the cohort rather than on their own quota).

`borrowing=False` replays hard quotas (no cohort sharing): each queue runs at most its nominal,
from the first step (what ran above it there, after a plan lowered the nominal, is not kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np

from gpuledger.optimizer.quota.demand import RESOLUTION, Demand
from gpuledger.optimizer.quota.spec import Quota

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.optimizer.quota.inputs import QuotaInputs

QuotaSet = Mapping[tuple[str, str, str], Quota]
"""(cluster_queue, flavor, resource) → quota."""


@dataclass(frozen=True)
class ReplayResult:
    pending_gpu_minutes: float
    idle_quota_gpu_minutes: float
    demand_gpu_minutes: float
    per_queue_pending: dict[str, float]
    borrowed_gpu_minutes: float = 0.0
    per_queue_demand: dict[str, float] = field(default_factory=dict)


def replay(inputs: QuotaInputs, quotas: QuotaSet, *, borrowing: bool = True,
           history: pl.DataFrame | Demand | None = None, resolution: timedelta = RESOLUTION) -> ReplayResult:
    """Replay `history` (default: the inputs' history) against `quotas` (steps 1-4 above),
    on buckets of `resolution` (or the history's step, if coarser) holding mean demand."""
    return replay_many(inputs, [quotas], borrowing=borrowing, history=history, resolution=resolution)[0]


def replay_many(inputs: QuotaInputs, quota_sets: Sequence[QuotaSet], *, borrowing: bool = True,
                history: pl.DataFrame | Demand | None = None, resolution: timedelta = RESOLUTION
                ) -> list[ReplayResult]:
    """`replay` of several quota sets on the same demand, in one pass."""
    grid = _grid(inputs, history)
    return replay_batch(inputs, [(grid, q) for q in quota_sets], borrowing=borrowing, resolution=resolution)


def replay_batch(inputs: QuotaInputs, jobs: Sequence[tuple[Demand, QuotaSet]], *, borrowing: bool = True,
                 resolution: timedelta = RESOLUTION) -> list[ReplayResult]:
    """`replay` of several (demand, quotas) pairs, each on its own history, in one pass.

    Without borrowing every queue runs min(demand, nominal) at every step (no cohort sharing,
    so the steps do not depend on each other) and the sums are taken at once. With borrowing the
    steps are simulated in order, every job and pool side by side (a shorter history is padded
    in front with steps of no demand, which leave nothing running: exactly a fresh start); a
    step where no queue wants more than its nominal is not simulated, since after it every queue
    runs exactly its demand whatever ran before."""
    if not jobs:
        return []
    grids = [d.coarsen(max(inputs.step, resolution, d.step)) for d, _ in jobs]
    layout = _Layout(inputs)
    steps = max(g.buckets for g in grids)
    tensor = np.zeros((steps, len(jobs), *layout.shape))
    pad = np.zeros(len(jobs), dtype=np.int64)
    nominal, borrow, lend, opening = (np.zeros((len(jobs), *layout.shape)) for _ in range(4))
    for b, (grid, (_, quotas)) in enumerate(zip(grids, jobs, strict=True)):
        pad[b] = steps - grid.buckets
        tensor[pad[b]:, b], opening[b] = layout.tensor(grid)
        nominal[b], borrow[b], lend[b] = layout.quotas(quotas, borrowing)
    if borrowing:
        pending, idle, borrowed = _simulate(tensor, nominal, borrow, lend, weights=layout.weight,
                                            reclaims=layout.reclaims, unit=layout.unit, pad=pad,
                                            opening=opening)
    else:
        pending, idle, borrowed = _hard(tensor, nominal, layout.unit, pad)
    asked = tensor.sum(axis=0)
    return [layout.result(pending[b], float(idle[b]), float(borrowed[b]), asked[b],
                          grids[b].step.total_seconds() / 60) for b in range(len(jobs))]


def coarsen(inputs: QuotaInputs, resolution: timedelta = RESOLUTION) -> QuotaInputs:
    """The inputs with their history as mean demand per `resolution` bucket (absent samples in a
    bucket count as no demand): what every replay would compute anyway, done once, so a plan
    that replays and refits many times does not re-bucket a month of one-minute samples each
    time. Histories already at `resolution` or coarser are returned as they are."""
    if inputs.step >= resolution or inputs.history.is_empty():
        return inputs
    return inputs.with_demand(inputs.demand.coarsen(resolution))


def _grid(inputs: QuotaInputs, history: pl.DataFrame | Demand | None) -> Demand:
    if history is None:
        return inputs.demand
    if isinstance(history, Demand):
        return history
    return cached_grid(history, inputs.step)


class _Layout:
    """Pools (cohort, flavor, resource) as rows and their queues as columns, padded; a queue's
    column of the demand grid is looked up by its key, so grids with other columns fit too."""

    def __init__(self, inputs: QuotaInputs) -> None:
        pools: dict[tuple[str, str, str], list[str]] = {}
        for q in inputs.queues:
            for f, r in q.quotas:
                pools.setdefault((q.pool, f, r), []).append(q.name)
        self.keys = sorted(pools)
        width = max((len(v) for v in pools.values()), default=0)
        self.shape = (len(self.keys), width)
        weights = {q.name: max(q.weight, 1e-9) for q in inputs.queues}
        reclaiming = {q.name for q in inputs.queues if q.reclaims}
        self.weight = np.zeros(self.shape)
        self.reclaims = np.zeros(self.shape, dtype=bool)
        self.unit = np.zeros(self.shape)
        units = {q.name: q.units for q in inputs.queues}
        self.slot: dict[tuple[str, str, str], tuple[int, int]] = {}
        for p, key in enumerate(self.keys):
            _, f, r = key
            for j, name in enumerate(pools[key]):
                self.slot[(name, f, r)] = (p, j)
                self.weight[p, j] = weights[name]
                self.reclaims[p, j] = name in reclaiming
                self.unit[p, j] = _admission_unit(units[name].get(r, 0.0))
        self.shares = np.array([not k[0].startswith("(no cohort") for k in self.keys], dtype=bool)

    def tensor(self, demand: Demand) -> tuple[np.ndarray, np.ndarray]:
        """(buckets, pools, queues) demand and (pools, queues) what the history recorded running
        at its first bucket; padding slots, unknown series and an unrecorded opening are zero."""
        column = np.full(self.shape, len(demand.keys), dtype=np.int64)
        for key, (p, j) in self.slot.items():
            i = demand.index(key)
            if i is not None:
                column[p, j] = i
        padded = np.concatenate([demand.values, np.zeros((demand.buckets, 1))], axis=1)
        first = demand.opening
        opening = np.zeros(self.shape) if first is None else np.append(first, 0.0)[column]
        return padded[:, column], opening

    def quotas(self, quotas: QuotaSet, borrowing: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nominal, borrow, lend = (np.zeros(self.shape) for _ in range(3))
        for (name, f, r), (p, j) in self.slot.items():
            quota = quotas.get((name, f, r), Quota(0.0))
            nominal[p, j] = quota.nominal
            shares = borrowing and bool(self.shares[p])
            borrow[p, j] = _limit(quota.borrowing_limit) if shares else 0.0
            lend[p, j] = min(_limit(quota.lending_limit), quota.nominal) if shares else 0.0
        return nominal, borrow, lend

    def result(self, pending: np.ndarray, idle: float, borrowed: float, asked: np.ndarray,
               minutes: float) -> ReplayResult:
        per_queue: dict[str, float] = {}
        per_demand: dict[str, float] = {}
        for (name, _, _), (p, j) in self.slot.items():
            per_queue[name] = per_queue.get(name, 0.0) + float(pending[p, j]) * minutes
            per_demand[name] = per_demand.get(name, 0.0) + float(asked[p, j]) * minutes
        return ReplayResult(float(pending.sum()) * minutes, idle * minutes, float(asked.sum()) * minutes,
                            per_queue, borrowed * minutes, per_demand)


_CACHE: list[tuple[pl.DataFrame, timedelta, Demand]] = []
CACHED = 8


def cached_grid(frame: pl.DataFrame, step: timedelta) -> Demand:
    """`demand_of`, remembered for the last few frames: callers replay the same held-out frame
    under several quota sets. Keyed by the frame object itself (kept alive here, so its
    identity cannot be reused)."""
    from gpuledger.optimizer.quota.demand import demand_of

    for held, held_step, grid in _CACHE:
        if held is frame and held_step == step:
            return grid
    grid = demand_of(frame, step)
    _CACHE.append((frame, step, grid))
    del _CACHE[:-CACHED]
    return grid


def _admission_unit(smallest: float) -> float:
    """The unit step 2-3b admits a queue in: its smallest request, where that is more than one.
    A queue with one-GPU (or one-instance) workloads is replayed fluidly: every whole amount of
    free quota fits one of them, and a fraction is the bucket's mean over its samples, not
    quota no workload fits (decision 0249)."""
    return smallest if smallest > 1 else 0.0


def _limit(value: float | None) -> float:
    return float("inf") if value is None else value


def _whole(offered: np.ndarray, wanted: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """What a queue admits of `offered` capacity when it still wants `wanted` in workloads of
    `unit` (step 2-3b): all it wants if that fits, else whole units; any fraction where the
    unit is 0 (fluid)."""
    eps = 1e-9
    whole = np.floor((offered + eps) / np.where(unit > 0, unit, 1.0)) * unit
    return np.where((unit <= 0) | (offered >= wanted - eps), offered, np.minimum(whole, offered))


def _hard(demand: np.ndarray, nominal: np.ndarray, unit: np.ndarray, pad: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """No borrowing, per job: pending per queue, idle and borrowed (none), in closed form;
    `demand` is (steps, jobs, pools, queues), job b's first `pad[b]` steps padding."""
    running = _whole(np.minimum(demand, nominal[None]), demand, unit)
    pending = (demand - running).sum(axis=0)
    steps = demand.shape[0] - pad
    idle = (steps[:, None] * nominal.sum(axis=2) - running.sum(axis=(0, 3))).sum(axis=1)
    return pending, idle, np.zeros(len(nominal))


def _simulate(demand: np.ndarray, nominal: np.ndarray, borrow: np.ndarray, lend: np.ndarray, *,
              weights: np.ndarray, reclaims: np.ndarray, unit: np.ndarray, pad: np.ndarray,
              opening: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """With borrowing, per job: total pending per queue, idle, and the total borrowed (running
    above nominal); at a job's first step (`pad`) what `opening` says ran is running. Jobs'
    pools are the rows of one array, stepped through together, but only at the steps where some
    row is congested; every other row and step is summed in closed form:
    - a row whose queues cannot borrow runs min(demand, nominal), as without borrowing;
    - a row that is not congested ends the step running exactly its demand, whatever ran before:
      one where no queue wants more than its nominal, or, when every queue may borrow all that
      is free (no borrowing or lending limits), one whose total demand fits its capacity."""
    steps, jobs, pools, width = demand.shape
    rows = (jobs * pools, width)
    flat = demand.reshape(steps, *rows)
    n2, b2, l2 = nominal.reshape(rows), borrow.reshape(rows), lend.reshape(rows)
    w2 = np.broadcast_to(weights, nominal.shape).reshape(rows)
    r2 = np.broadcast_to(reclaims, nominal.shape).reshape(rows)
    u2 = np.broadcast_to(unit, nominal.shape).reshape(rows)
    cap2 = n2.sum(axis=1)
    alive = np.repeat(np.arange(steps)[:, None] >= pad[None, :], pools, axis=1)   # (steps, rows)
    hard: np.ndarray = np.asarray((b2 <= 0).all(axis=1))
    free_for_all = np.isinf(b2).all(axis=1) & (l2 >= n2).all(axis=1)
    total = flat.sum(axis=2)                                                     # (steps, rows)
    congested = np.where(free_for_all, total > cap2 + 1e-9, (flat > n2 + 1e-9).any(axis=2)) & ~hard
    settled = ~congested                                                         # closed form
    running_hard = _whole(np.minimum(flat, n2), flat, u2)
    pending = np.where(hard[:, None], (flat - running_hard).sum(axis=0), 0.0)
    used = np.where(hard, running_hard.sum(axis=2), total)                       # (steps, rows)
    idle = ((cap2 - used) * (settled & alive)).sum(axis=0)
    borrowed = (np.maximum(flat - n2, 0.0).sum(axis=2) * (settled & ~hard)).sum(axis=0)
    running = np.zeros(rows)
    first = np.repeat(pad, pools)                                                # a row's first step
    recorded = opening.reshape(rows)
    previous = -2
    for t in np.flatnonzero(congested.any(axis=1)):
        d, mask = flat[t], congested[t]
        if t != previous + 1:  # every row was settled the step before: it ran its demand
            running = flat[t - 1].copy() if t else np.zeros(rows)
        fresh = first == t
        running[fresh] = recorded[fresh]
        previous = int(t)
        running = _step(running, d, n2, b2, lend=l2, weights=w2, reclaims=r2, unit=u2, capacity=cap2)
        pending += np.maximum(d - running, 0.0) * mask[:, None]
        idle += np.maximum(0.0, cap2 - running.sum(axis=1)) * mask
        borrowed += np.maximum(0.0, running - n2).sum(axis=1) * mask
    return (pending.reshape(nominal.shape), idle.reshape(jobs, pools).sum(axis=1),
            borrowed.reshape(jobs, pools).sum(axis=1))


def _step(running: np.ndarray, d: np.ndarray, nominal: np.ndarray, borrow: np.ndarray, *, lend: np.ndarray,
          weights: np.ndarray, reclaims: np.ndarray, unit: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Steps 1-3b of the module docstring for one bucket, every row (a job's pool) at once."""
    running = np.minimum(running, d)                                         # 1. finished work leaves
    if reclaims.any():
        running = _reclaim(running, d, nominal, reclaims, capacity)          # 1b. reclaim
    if not (unit > 0).any():
        return _admit(running, d, nominal, borrow, lend=lend, weights=weights, capacity=capacity)
    running = running.copy()
    frozen = np.zeros(running.shape, dtype=bool)
    rows = np.arange(len(running))                                           # 2-3b. whole units
    while rows.size:
        now = running[rows]
        want = np.where(frozen[rows], now, d[rows])
        offered = _admit(now, want, nominal[rows], borrow[rows], lend=lend[rows], weights=weights[rows],
                         capacity=capacity[rows]) - now
        taken = _whole(offered, want - now, unit[rows])
        running[rows] = now + taken
        short = offered - taken > 1e-9
        again = short.any(axis=1)
        # per row, the half of the short queues whose next unit is furthest from fitting what
        # they were offered wait (at least one); only those rows are offered again
        gap = np.where(short, unit[rows] - (offered - taken), -np.inf)[again]
        rank = np.argsort(np.argsort(-gap, axis=1), axis=1)
        waits = rank < np.ceil(short[again].sum(axis=1, keepdims=True) / 2)
        rows = rows[again]
        frozen[rows] |= waits
    return running


def _admit(running: np.ndarray, d: np.ndarray, nominal: np.ndarray, borrow: np.ndarray, *, lend: np.ndarray,
           weights: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Steps 2-3: pending work admitted within its own nominal, then borrowed by weight."""
    eps = 1e-9
    free = capacity - running.sum(axis=1)
    own = np.minimum(d - running, np.maximum(0.0, nominal - running))        # 2. own nominal first
    total = own.sum(axis=1)
    over = total > free + eps
    if over.any():
        own *= np.where(over, np.maximum(free, 0.0) / np.maximum(total, eps), 1.0)[:, None]
    running = running + own
    above = np.maximum(0.0, running - nominal)
    want = np.minimum(d - running, np.maximum(0.0, borrow - above))
    lendable = np.minimum(lend, np.maximum(0.0, nominal - running)).sum(axis=1)
    available = np.minimum(lendable - above.sum(axis=1), capacity - running.sum(axis=1))
    if (available > eps).any() and (want > eps).any():                      # 3. borrow by weight
        running = running + _water_fill(want, weights, np.maximum(available, 0.0))
    return running


def _reclaim(running: np.ndarray, d: np.ndarray, nominal: np.ndarray, reclaims: np.ndarray,
             capacity: np.ndarray) -> np.ndarray:
    """Step 1b: per row, what the reclaiming queues want within their nominal beyond the free
    capacity is taken from the borrowers (their running work above nominal, in proportion to
    it, never more than they borrow); the free and reclaimed capacity then runs the reclaiming
    queues' work, shared in proportion to what each wants. A row without a shortfall is left
    as it is (step 2 admits within nominal as always)."""
    eps = 1e-9
    need = np.where(reclaims, np.minimum(d - running, np.maximum(0.0, nominal - running)), 0.0)
    wanted = need.sum(axis=1)
    free = np.maximum(capacity - running.sum(axis=1), 0.0)
    above = np.maximum(0.0, running - nominal)
    lent = above.sum(axis=1)
    take = np.clip(wanted - free, 0.0, lent)
    short = take > eps
    if not short.any():
        return running
    running = running - above * np.where(short, take / np.maximum(lent, eps), 0.0)[:, None]
    grant = np.where(short, np.minimum(wanted, free + take) / np.maximum(wanted, eps), 0.0)
    return running + need * grant[:, None]


def _water_fill(want: np.ndarray, weights: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Per row, share `amount` in proportion to weights, never more than a queue wants: the level
    λ with Σ min(want, λ·weight) = amount, found on the sorted breakpoints want/weight (queues
    met in full below a breakpoint, the rest still filling at their weights)."""
    active = (want > 1e-12) & (weights > 0)
    weight = np.where(active, weights, 0.0)
    wanted = np.where(active, want, 0.0)
    ratio = np.divide(want, weights, out=np.full(want.shape, np.inf), where=active)
    order = np.argsort(ratio, axis=1) + (np.arange(want.shape[0]) * want.shape[1])[:, None]
    r, w, x = ratio.ravel()[order], weight.ravel()[order], wanted.ravel()[order]
    done = np.cumsum(x, axis=1) - x                     # met in full below breakpoint k
    rest = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]        # still filling at breakpoint k
    finite = np.isfinite(r)
    reach = (done + np.where(finite, r, 0.0) * rest >= amount[:, None] - 1e-12) | ~finite
    k = reach.argmax(axis=1)
    at = np.arange(len(k))
    tail = rest[at, k]
    level = np.where(tail > 0, (amount - done[at, k]) / np.where(tail > 0, tail, 1.0),
                     1e300)  # 1e300: every queue met in full
    return np.minimum(wanted, np.maximum(level, 0.0)[:, None] * weight)
