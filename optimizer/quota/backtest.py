"""Rolling-origin backtest: the out-of-sample measure of a quota plan, for any queue system.

For each origin t (the last `count` windows of length h, each fitted on at least `min_fit`):
fit on [start, t), replay [t, t + h) under the current quotas and under the quotas fitted
there, with and without cohort borrowing (`optimizer.quota.replay`). The plan's expected effect
is the sum over the held-out windows, its spread the per-origin figures; the in-sample replay is
kept only as a comparison, never as the effect.

Why rolling origins and not one split: one window says little about a plan that will meet next
week's demand, not last week's; several origins show whether the gain holds as demand drifts.
Why the fit is a callable: the same fit (floors, fairness repair, solve) is measured as is used
to make the plan, so the measured figure is the figure of the procedure that produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import polars as pl

from gpuledger.optimizer.plan.evaluation import OriginResult
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.replay import QuotaSet, ReplayResult, replay

Fit = Callable[[QuotaInputs], QuotaSet]
DAY = timedelta(days=1)


@dataclass(frozen=True)
class Split:
    train: pl.DataFrame
    test: pl.DataFrame
    start: datetime
    end: datetime
    fit_days: float


@dataclass(frozen=True)
class Backtest:
    origins: tuple[OriginResult, ...]
    before: ReplayResult | None
    """Current quotas, no borrowing, summed over the held-out windows (None: no origin)."""
    after: ReplayResult | None
    before_borrowing: ReplayResult | None
    after_borrowing: ReplayResult | None
    reason: str = ""

    @property
    def held_out_days(self) -> float:
        return round(sum((o.end - o.start) / DAY for o in self.origins), 3)


def rolling_splits(history: pl.DataFrame, step: timedelta, window: timedelta, count: int,
                   min_fit: timedelta) -> tuple[list[Split], str]:
    """The last `count` windows of `window` that leave at least `min_fit` to fit on before each;
    fewer when the history is short, one shorter window when not even one fits (at least a
    day), none (with the reason) below that."""
    first, last = history["ts"].min(), history["ts"].max()
    assert isinstance(first, datetime) and isinstance(last, datetime)
    end = last + step
    span = end - first
    room = span - min_fit
    fits = min(count, int(room / window)) if room > timedelta(0) else 0
    if fits == 0:
        if room < DAY:
            return [], (f"the history covers {span / DAY:.1f} days; a held-out test needs at least "
                        f"{min_fit / DAY:g} days to fit on plus 1 day to replay")
        fits, window = 1, room
    splits = []
    for i in range(fits):
        t = end - (fits - i) * window
        splits.append(Split(history.filter(pl.col("ts") < t),
                            history.filter((pl.col("ts") >= t) & (pl.col("ts") < t + window)),
                            t, t + window, round((t - first) / DAY, 3)))
    return splits, ""


def run_backtest(inputs: QuotaInputs, old: QuotaSet, fit: Fit, splits: Sequence[Split],
                 reason: str = "") -> Backtest:
    """Fit on each split's train, replay its test under `old` and the fitted quotas."""
    rows: list[OriginResult] = []
    sums: list[list[ReplayResult]] = [[], [], [], []]
    for s in splits:
        train = replace(inputs, history=s.train)
        new = fit(train)
        runs = (replay(inputs, old, borrowing=False, history=s.test),
                replay(inputs, new, borrowing=False, history=s.test),
                replay(inputs, old, history=s.test), replay(inputs, new, history=s.test))
        for acc, r in zip(sums, runs, strict=True):
            acc.append(r)
        rows.append(OriginResult(
            start=s.start, end=s.end, fit_days=s.fit_days,
            pending_before=round(runs[0].pending_gpu_minutes, 1),
            pending_after=round(runs[1].pending_gpu_minutes, 1),
            pending_before_borrowing=round(runs[2].pending_gpu_minutes, 1),
            pending_after_borrowing=round(runs[3].pending_gpu_minutes, 1),
            borrowed_before=round(runs[2].borrowed_gpu_minutes, 1),
            borrowed_after=round(runs[3].borrowed_gpu_minutes, 1),
        ))
    if not rows:
        return Backtest((), None, None, None, None, reason)
    b, a, bb, ab = (combine(acc) for acc in sums)
    return Backtest(tuple(rows), b, a, bb, ab, reason)


def combine(results: Sequence[ReplayResult]) -> ReplayResult:
    """Replays of several windows as one: every figure summed (queue by queue)."""
    def add(maps: Sequence[dict[str, float]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in maps:
            for k, v in m.items():
                out[k] = out.get(k, 0.0) + v
        return out

    return ReplayResult(
        pending_gpu_minutes=sum(r.pending_gpu_minutes for r in results),
        idle_quota_gpu_minutes=sum(r.idle_quota_gpu_minutes for r in results),
        demand_gpu_minutes=sum(r.demand_gpu_minutes for r in results),
        per_queue_pending=add([r.per_queue_pending for r in results]),
        borrowed_gpu_minutes=sum(r.borrowed_gpu_minutes for r in results),
        per_queue_demand=add([r.per_queue_demand for r in results]),
    )
