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
   running work uses × step; borrowed quota = running work above its queue's nominal × step
   (how much the queues rely on the cohort rather than on their own quota).

`borrowing=False` replays hard quotas (no cohort sharing): each queue runs at most its nominal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

import numpy as np
import polars as pl

from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.spec import Quota

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


RESOLUTION = timedelta(minutes=5)


def replay(inputs: QuotaInputs, quotas: QuotaSet, *, borrowing: bool = True,
           history: pl.DataFrame | None = None, resolution: timedelta = RESOLUTION) -> ReplayResult:
    """Replay `history` (default: the inputs' history) against `quotas` (steps 1-4 above),
    on buckets of `resolution` (or the history's step, if coarser) holding mean demand."""
    frame = inputs.history if history is None else history
    step = max(inputs.step, resolution)
    pools: dict[tuple[str, str, str], list[str]] = {}
    for q in inputs.queues:
        for f, r in q.quotas:
            pools.setdefault((q.pool, f, r), []).append(q.name)
    keys = sorted(pools)
    width = max((len(v) for v in pools.values()), default=0)
    weights = {q.name: max(q.weight, 1e-9) for q in inputs.queues}
    shape = (len(keys), width)
    nominal, borrow, lend, weight = (np.zeros(shape) for _ in range(4))
    slot: dict[tuple[str, str, str], tuple[int, int]] = {}
    for p, key in enumerate(keys):
        pool, f, r = key
        shares = borrowing and not pool.startswith("(no cohort")
        for j, name in enumerate(pools[key]):
            quota = quotas.get((name, f, r), Quota(0.0))
            slot[(name, f, r)] = (p, j)
            nominal[p, j] = quota.nominal
            weight[p, j] = weights[name]
            borrow[p, j] = _limit(quota.borrowing_limit) if shares else 0.0
            lend[p, j] = min(_limit(quota.lending_limit), quota.nominal) if shares else 0.0
    demand = _cached_dense(frame, slot, shape, step)
    pending, idle, borrowed = _simulate(demand, nominal, borrow, lend, weight)
    minutes = step.total_seconds() / 60
    asked = demand.sum(axis=0) if demand.size else np.zeros(shape)
    per_queue: dict[str, float] = {}
    per_demand: dict[str, float] = {}
    for (name, _, _), (p, j) in slot.items():
        per_queue[name] = per_queue.get(name, 0.0) + float(pending[p, j]) * minutes
        per_demand[name] = per_demand.get(name, 0.0) + float(asked[p, j]) * minutes
    return ReplayResult(float(pending.sum()) * minutes, float(idle.sum()) * minutes,
                        float(demand.sum()) * minutes, per_queue, borrowed * minutes, per_demand)


def coarsen(inputs: QuotaInputs, resolution: timedelta = RESOLUTION) -> QuotaInputs:
    """The inputs with their history as mean demand per `resolution` bucket (absent samples in a
    bucket count as no demand, as in `_dense`): what every replay would compute anyway, done
    once, so a plan that replays and refits many times does not re-bucket a month of one-minute
    samples each time. Histories already at `resolution` or coarser are returned as they are."""
    if inputs.step >= resolution or inputs.history.is_empty():
        return inputs
    frame = inputs.history
    start = frame["ts"].min()
    micro = int(resolution.total_seconds() * 1_000_000)
    bucket = ((pl.col("ts") - pl.lit(start)).dt.total_microseconds() // micro)
    tagged = frame.with_columns(bucket.alias("b"))
    times = tagged.group_by("b").agg(pl.col("ts").n_unique().alias("k"))
    coarse = (tagged.group_by("b", "cluster_queue", "flavor", "resource").agg(pl.col("demand").sum())
              .join(times, on="b")
              .select((pl.lit(start) + pl.duration(microseconds=pl.col("b") * micro)).alias("ts"),
                      "cluster_queue", "flavor", "resource", (pl.col("demand") / pl.col("k")).alias("demand"))
              .sort("ts", "cluster_queue", "flavor", "resource"))
    return replace(inputs, history=coarse, step=resolution)


_CACHE: list[tuple[pl.DataFrame, tuple[object, ...], np.ndarray]] = []
CACHED = 8


def _cached_dense(frame: pl.DataFrame, slot: Mapping[tuple[str, str, str], tuple[int, int]],
                  shape: tuple[int, int], step: timedelta) -> np.ndarray:
    """`_dense`, remembered for the last few (frame, layout) pairs: a fit replays the same
    history under several quota sets, and bucketing millions of rows costs more than the replay.
    Keyed by the frame object itself (kept alive here, so its identity cannot be reused)."""
    key = (tuple(sorted(slot.items())), shape, step)
    for held, k, dense in _CACHE:
        if held is frame and k == key:
            return dense
    dense = _dense(frame, slot, shape, step)
    _CACHE.append((frame, key, dense))
    del _CACHE[:-CACHED]
    return dense


def _dense(frame: pl.DataFrame, slot: Mapping[tuple[str, str, str], tuple[int, int]],
           shape: tuple[int, int], step: timedelta) -> np.ndarray:
    """(buckets, pools, queues) mean demand; samples of unknown series are ignored."""
    if frame.is_empty():
        return np.zeros((0, *shape))
    start = frame["ts"].min()
    keys = pl.DataFrame(
        [(q, f, r, p, j) for (q, f, r), (p, j) in slot.items()],
        schema={"cluster_queue": pl.String, "flavor": pl.String, "resource": pl.String,
                "p": pl.Int64, "j": pl.Int64}, orient="row",
    )
    micro = int(step.total_seconds() * 1_000_000)
    bucketed = frame.with_columns(
        ((pl.col("ts") - pl.lit(start)).dt.total_microseconds() // micro).alias("t")
    )
    joined = bucketed.join(keys, on=["cluster_queue", "flavor", "resource"], how="inner")
    buckets = int(bucketed["t"].max()) + 1  # type: ignore[arg-type]
    samples = bucketed.group_by("t").agg(pl.col("ts").n_unique().alias("k"))
    per_bucket = np.ones(buckets)
    per_bucket[samples["t"].to_numpy()] = samples["k"].to_numpy()
    out = np.zeros((buckets, *shape))
    t = joined["t"].to_numpy()
    np.add.at(out, (t, joined["p"].to_numpy(), joined["j"].to_numpy()), joined["demand"].to_numpy())
    return out / per_bucket[:, None, None]


def _limit(value: float | None) -> float:
    return float("inf") if value is None else value


def _simulate(demand: np.ndarray, nominal: np.ndarray, borrow: np.ndarray, lend: np.ndarray,
              weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """All pools at once, (pools, queues) arrays: total pending per queue, idle per pool, and
    the total borrowed (running above nominal)."""
    capacity = nominal.sum(axis=1)
    running = np.zeros_like(nominal)
    pending = np.zeros_like(nominal)
    idle = np.zeros(nominal.shape[0])
    borrowed = 0.0
    eps = 1e-9
    for d in demand:
        running = np.minimum(running, d)                                   # 1. finished work leaves
        free = capacity - running.sum(axis=1)
        own = np.minimum(d - running, np.maximum(0.0, nominal - running))  # 2. own nominal first
        total = own.sum(axis=1)
        scale = np.where(total > free + eps, np.maximum(free, 0.0) / np.maximum(total, eps), 1.0)
        running = running + own * scale[:, None]
        above = np.maximum(0.0, running - nominal)
        want = np.minimum(d - running, np.maximum(0.0, borrow - above))
        lendable = np.minimum(lend, np.maximum(0.0, nominal - running)).sum(axis=1)
        available = np.minimum(lendable - above.sum(axis=1), capacity - running.sum(axis=1))
        if (available > eps).any() and (want > eps).any():               # 3. borrow by weight
            running = running + _water_fill(want, weights, np.maximum(available, 0.0))
        pending += np.maximum(0.0, d - running)                           # 4. measure
        idle += np.maximum(0.0, capacity - running.sum(axis=1))
        borrowed += float(np.maximum(0.0, running - nominal).sum())
    return pending, idle, borrowed


def _water_fill(want: np.ndarray, weights: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Per pool, share `amount` in proportion to weights, never more than a queue wants."""
    give = np.zeros_like(want)
    active = want > 1e-12
    left = amount.copy()
    for _ in range(want.shape[1]):
        wsum = (weights * active).sum(axis=1)
        share = np.where(wsum > 0, left / np.maximum(wsum, 1e-12), 0.0)[:, None] * weights * active
        step = np.minimum(share, want - give)
        give += step
        left -= step.sum(axis=1)
        active &= want - give > 1e-12
        if not ((left > 1e-9) & active.any(axis=1)).any():
            break
    return give
