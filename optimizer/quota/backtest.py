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
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuledger.optimizer.plan.evaluation import OriginResult
from gpuledger.optimizer.quota.demand import Demand
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.replay import QuotaSet, ReplayResult, replay_batch

Fit = Callable[[QuotaInputs], QuotaSet]
DAY = timedelta(days=1)


@dataclass(frozen=True)
class Split:
    train: QuotaInputs
    """The inputs with the history before the origin only."""
    test: Demand
    start: datetime
    end: datetime
    fit_days: float


@dataclass(frozen=True)
class Window:
    """One origin's held-out replays, no borrowing and with: current quotas, then fitted."""

    split: Split
    fitted: QuotaSet
    before: ReplayResult
    after: ReplayResult
    before_borrowing: ReplayResult
    after_borrowing: ReplayResult


@dataclass(frozen=True)
class Backtest:
    origins: tuple[OriginResult, ...]
    before: ReplayResult | None
    """Current quotas, no borrowing, summed over the held-out windows (None: no origin)."""
    after: ReplayResult | None
    before_borrowing: ReplayResult | None
    after_borrowing: ReplayResult | None
    reason: str = ""
    windows: tuple[Window, ...] = ()
    """Each origin's replays and fitted quotas (the held-out repair sizes floors from them)."""

    @property
    def held_out_days(self) -> float:
        return round(sum((o.end - o.start) / DAY for o in self.origins), 3)


def rolling_splits(inputs: QuotaInputs, window: timedelta, count: int, min_fit: timedelta
                   ) -> tuple[list[Split], str]:
    """The last `count` windows of `window` that leave at least `min_fit` to fit on before each;
    fewer when the history is short, one shorter window when not even one fits (at least a
    day), none (with the reason) below that. Cut on the history's grid (`Demand.window`)."""
    grid = inputs.demand
    first, end = grid.start, grid.end
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
        splits.append(Split(inputs.window(end=t), grid.window(t, t + window), t, t + window,
                            round((t - first) / DAY, 3)))
    return splits, ""


Replays = tuple[ReplayResult, ReplayResult]
"""One window replayed under one quota set: without borrowing, then with."""


def baseline_replays(inputs: QuotaInputs, old: QuotaSet, splits: Sequence[Split]) -> list[Replays]:
    """Each split's test replayed under `old`, both modes, each mode in one pass: what every
    backtest of the same splits replays first, whatever was fitted (`run_backtest`'s
    `baseline`; the held-out repair re-runs the backtest up to `ROUNDS` times)."""
    jobs = [(s.test, old) for s in splits]
    return list(zip(replay_batch(inputs, jobs, borrowing=False), replay_batch(inputs, jobs), strict=True))


def run_backtest(inputs: QuotaInputs, old: QuotaSet, fit: Fit, splits: Sequence[Split],
                 reason: str = "", *, baseline: Sequence[Replays] | None = None) -> Backtest:
    """Fit on each split's train, then replay every split's test under `old` and its fitted
    quotas, both replay modes, each mode in one pass for all of them. `baseline`: the splits'
    replays under `old` made once before (`baseline_replays`); only the fitted quotas are
    replayed then."""
    fitted = [fit(s.train) for s in splits]
    if baseline is None:
        jobs = [(s.test, q) for s, new in zip(splits, fitted, strict=True) for q in (old, new)]
        hard = replay_batch(inputs, jobs, borrowing=False)
        shared = replay_batch(inputs, jobs)
        pairs = [((hard[2 * i], shared[2 * i]), (hard[2 * i + 1], shared[2 * i + 1]))
                 for i in range(len(splits))]
    else:
        jobs = [(s.test, new) for s, new in zip(splits, fitted, strict=True)]
        after = zip(replay_batch(inputs, jobs, borrowing=False), replay_batch(inputs, jobs), strict=True)
        pairs = list(zip(baseline, after, strict=True))
    windows = [Window(s, new, b[0], a[0], b[1], a[1])
               for s, new, (b, a) in zip(splits, fitted, pairs, strict=True)]
    rows = [OriginResult(
        start=w.split.start, end=w.split.end, fit_days=w.split.fit_days,
        pending_before=round(w.before.pending_gpu_minutes, 1),
        pending_after=round(w.after.pending_gpu_minutes, 1),
        pending_before_borrowing=round(w.before_borrowing.pending_gpu_minutes, 1),
        pending_after_borrowing=round(w.after_borrowing.pending_gpu_minutes, 1),
        borrowed_before=round(w.before_borrowing.borrowed_gpu_minutes, 1),
        borrowed_after=round(w.after_borrowing.borrowed_gpu_minutes, 1),
    ) for w in windows]
    if not rows:
        return Backtest((), None, None, None, None, reason)
    b, a, bb, ab = (combine([getattr(w, k) for w in windows])
                    for k in ("before", "after", "before_borrowing", "after_borrowing"))
    return Backtest(tuple(rows), b, a, bb, ab, reason, tuple(windows))


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
