"""One quota fit: forecast, floors, solve, and the fairness repair, on one demand history.

The same procedure makes the plan (on the whole lookback) and is measured by the backtest (on
each origin's past), so the figure the plan reports is the figure of the procedure itself.

1. Check the guaranteed minimums against capacity, per cohort.
2. Forecast every (queue, flavor, resource) for the horizon (`optimizer.quota.forecast`).
3. Floors from each queue's own demand and current quota (`optimizer.quota.guarantees`),
   raised where the held-out repair says so (`FitSpec.raised`, `optimizer.quota.held_out`).
4. Solve the lexicographic quota model (`optimizer.quota.model`).
5. Replay the fitting history (and its last horizon) under the current and the fitted quotas,
   without borrowing (at `CHECK_RESOLUTION`) and with it (at `CHECK_BORROWING`); a queue whose
   pending rises by more than the bound keeps its current quota (its floors are raised to it)
   and the model is solved again, at most `REPAIRS` times.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

import numpy as np

from gpuledger.core.config import Settings
from gpuledger.core.config_plans import QuotaPlanSettings
from gpuledger.core.errors import InputError
from gpuledger.optimizer.quota.demand import Demand
from gpuledger.optimizer.quota.forecast import Forecast, forecast
from gpuledger.optimizer.quota.guarantees import (
    Floor,
    QuotaKey,
    check_floors,
    demand_floors,
    rise_violations,
)
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.model import (
    POINTS,
    QuotaProblem,
    QuotaSolution,
    SeriesSpec,
    limits,
    solve_quotas,
)
from gpuledger.optimizer.quota.replay import ReplayResult, replay_batch
from gpuledger.optimizer.quota.spec import GPU, Quota

REPAIRS = 4
CHECK_RESOLUTION = timedelta(minutes=15)
"""The fairness check's replay step without borrowing (the reported backtest replays at the
finer default)."""
CHECK_BORROWING = timedelta(hours=1)
"""The same with borrowing, which is simulated step by step: coarser, since the held-out check
of the verdict replays at the finer default anyway."""
MARGIN = 0.5
"""The fit holds each queue to this share of the bound: the fitting history flatters a plan,
so the held-out figure (what is reported) gets the rest as headroom."""
Guaranteed = Mapping[str, tuple[int, list[str]]]


@dataclass
class FitResult:
    problem: QuotaProblem
    solution: QuotaSolution
    forecast: Forecast
    new: dict[QuotaKey, Quota]
    floors: dict[QuotaKey, Floor]
    held: set[str] = field(default_factory=set)
    """Queues kept at their current quota by the fairness repair."""
    in_sample: tuple[ReplayResult, ...] = ()
    """Replays of the fitting history: old and new without borrowing, old and new with."""
    warnings: list[str] = field(default_factory=list)


def old_quotas(inputs: QuotaInputs) -> dict[QuotaKey, Quota]:
    return {(q.name, f, r): quota for q in inputs.queues for (f, r), quota in q.quotas.items()}


@dataclass(frozen=True)
class FitSpec:
    """Everything a fit needs besides the inputs: the same for the plan and every origin."""

    horizon: timedelta
    levels: tuple[float, ...]
    guaranteed: Guaranteed
    rules: QuotaPlanSettings
    time_limit_s: float
    workers: int
    reference: Mapping[QuotaKey, Quota] | None = None
    """The quotas no queue may be made worse off than (by the bound); None: the current ones.
    A chain of re-plans passes the quotas before the first one, so small losses cannot add up."""
    raised: Mapping[QuotaKey, Floor] = field(default_factory=dict)
    """Floors the held-out repair raised (`optimizer.quota.held_out`): kept in the plan and in
    every backtest origin's fit alike, so the re-check measures the repaired procedure."""


def fit_quotas(inputs: QuotaInputs, spec: FitSpec) -> FitResult:
    """Steps 2-5 of the module docstring on `inputs.demand`."""
    rules, guaranteed = spec.rules, spec.guaranteed
    demand = inputs.demand
    fc = forecast(demand, spec.horizon, spec.levels)
    floors = _floors(inputs, demand, spec)
    problem = build_problem(inputs, fc, guaranteed, {k: f.units for k, f in floors.items()})
    check_floors({k: f.units for k, f in floors.items()}, inputs.queues, problem.capacity)
    reference = dict(spec.reference) if spec.reference is not None else old_quotas(inputs)
    windows = _check_windows(demand, spec.horizon)
    base = _check(inputs, windows, reference)
    held: set[str] = set()
    budget = spec.time_limit_s / (REPAIRS + 1)
    for attempt in range(REPAIRS + 1):
        solution = solve_quotas(problem, budget, spec.workers)
        new = new_quotas(problem, solution)
        runs = _check(inputs, windows, new)
        bound = rules.max_pending_rise_share * MARGIN
        offenders = rise_violations(zip(base, runs, strict=True), bound) - held
        held_problem = _hold(problem, held | offenders, reference) if offenders else None
        if held_problem is None or attempt == REPAIRS:
            break
        held |= offenders
        problem = held_problem
    result = FitResult(problem, solution, fc, new, floors, held, (base[0], runs[0], base[1], runs[1]))
    if offenders:
        result.warnings.append(
            f"fairness: {len(offenders)} queue(s) still lose more than "
            f"{rules.max_pending_rise_share:.0%} of their demand after {REPAIRS} repairs: "
            + ", ".join(sorted(offenders)[:5]))
    return result


def _floors(inputs: QuotaInputs, demand: Demand, spec: FitSpec) -> dict[QuotaKey, Floor]:
    """Each series' floor (`guarantees.demand_floors`), or the raised one where that is higher
    (never above the current quota: the repair keeps what a team has, it does not add)."""
    floors = demand_floors(inputs.queues, demand, spec.rules, spec.horizon)
    for key, raised in spec.raised.items():
        mine = floors.get(key)
        if mine is not None and raised.units > mine.units:
            floors[key] = raised
    return floors


def _check_windows(demand: Demand, horizon: timedelta) -> list[Demand]:
    """The fitting history, and its last `horizon` when the history holds at least two: under
    drift the recent past is the better guide to who would lose, so the bound must hold there
    too."""
    if demand.end - demand.start < 2 * horizon:
        return [demand]
    return [demand, demand.window(demand.end - horizon)]


def _check(inputs: QuotaInputs, windows: list[Demand], quotas: Mapping[QuotaKey, Quota]
           ) -> list[ReplayResult]:
    """The fairness replays of `quotas`: each window without borrowing (at `CHECK_RESOLUTION`),
    then each with it (at `CHECK_BORROWING`), every window of a mode in one pass; the whole
    history's two come first (the in-sample figures)."""
    hard = replay_batch(inputs, [(w, quotas) for w in windows], borrowing=False, resolution=CHECK_RESOLUTION)
    shared = replay_batch(inputs, [(w, quotas) for w in windows], resolution=CHECK_BORROWING)
    return [r for pair in zip(hard, shared, strict=True) for r in pair]


def _hold(problem: QuotaProblem, held: set[str], reference: Mapping[QuotaKey, Quota]) -> QuotaProblem | None:
    """Raise the floors of `held` queues to their reference nominal quota (capped by capacity),
    and cap every other floor at its own reference quota; None when the floors would still not
    fit a pool.

    Why the cap: a floor keeps what a team would otherwise have, not what a past plan gave it
    beyond that; otherwise a standing plan's winners could block the repair of its losers.
    Without a reference the reference is the current quota, which floors never exceed."""
    def ref_of(s: SeriesSpec) -> int:
        ref = reference.get((s.queue, s.flavor, s.resource))
        return round(ref.nominal) if ref else s.old_nominal

    def floor_of(s: SeriesSpec) -> int:
        if s.queue in held:
            return max(s.floor, min(ref_of(s), problem.capacity[(s.pool, s.flavor, s.resource)]))
        return min(s.floor, ref_of(s))

    series = tuple(replace(s, floor=floor_of(s)) for s in problem.series)
    need: dict[tuple[str, str, str], int] = defaultdict(int)
    for s in series:
        need[(s.pool, s.flavor, s.resource)] += s.floor
    if any(total > problem.capacity[key] for key, total in need.items()):
        return None
    return replace(problem, series=series)


def guaranteed_minimums(inputs: QuotaInputs, settings: Settings, warnings: list[str]
                        ) -> dict[str, tuple[int, list[str]]]:
    """Step 1: team → (GPUs, its queues); capacity per cohort must cover the sum."""
    wanted = {**settings.teams.guaranteed_gpus, **inputs.guaranteed}
    out: dict[str, tuple[int, list[str]]] = {}
    per_cohort: dict[str, int] = defaultdict(int)
    for team, gpus in sorted(wanted.items()):
        queues = [q for q in inputs.queues if q.team == team or (q.team is None and q.name == team)]
        if not queues:
            warnings.append(f"guaranteed minimum for team {team!r}: no ClusterQueue belongs to it; ignored")
            continue
        if gpus < 0:
            raise InputError(f"teams.guaranteed_gpus.{team}: {gpus} must not be negative")
        out[team] = (gpus, [q.name for q in queues])
        per_cohort[queues[0].pool] += gpus
    for cohort, need in per_cohort.items():
        have = sum(v for (pool, _, r), v in inputs.capacity.items() if pool == cohort and r == GPU)
        if need > have:
            raise InputError(
                f"cohort {cohort}: guaranteed minimums add up to {need} GPUs but its capacity is "
                f"{have:g} {GPU}: lower teams.guaranteed_gpus or add capacity"
            )
    return out


def build_problem(inputs: QuotaInputs, fc: Forecast, guaranteed: Guaranteed,
                  floors: Mapping[QuotaKey, int] | None = None) -> QuotaProblem:
    """The model's series (forecast scenarios, current quota, floor) and constraints."""
    series = []
    capacity = {k: math.floor(v + 1e-9) for k, v in inputs.capacity.items()}
    # every horizon hour at every level, summarized per series in one vectorized call
    flat = fc.quantiles.reshape(-1, len(fc.keys))
    summary = np.quantile(flat, (np.arange(POINTS) + 0.5) / POINTS, axis=0) if fc.keys else None
    for q in inputs.queues:
        for (f, r), quota in sorted(q.quotas.items()):
            i = fc.index((q.name, f, r))
            scenarios = summary[:, i] if summary is not None and i is not None else np.zeros(0)
            series.append(SeriesSpec(
                queue=q.name, flavor=f, resource=r, pool=q.pool, weight=q.weight,
                scenarios=scenarios, hours=float(fc.hours),
                old_nominal=round(quota.nominal),
                old_borrowing=None if quota.borrowing_limit is None else round(quota.borrowing_limit),
                old_lending=None if quota.lending_limit is None else round(quota.lending_limit),
                shares_cohort=q.cohort is not None,
                floor=(floors or {}).get((q.name, f, r), 0),
            ))
    index = {(s.queue, s.flavor, s.resource): i for i, s in enumerate(series)}
    teams = {
        team: (gpus, tuple(i for (qn, _, r), i in index.items() if qn in queues and r == GPU))
        for team, (gpus, queues) in guaranteed.items()
    }
    return QuotaProblem(series=tuple(series), capacity=capacity, guaranteed=teams)


def new_quotas(problem: QuotaProblem, solution: QuotaSolution) -> dict[QuotaKey, Quota]:
    """Solver integers and the closed-form limits → quotas (None: unset)."""
    out = {}
    for spec, n, (borrowing, lending) in zip(problem.series, solution.nominal, limits(problem, solution),
                                             strict=True):
        out[(spec.queue, spec.flavor, spec.resource)] = Quota(
            float(n), None if borrowing is None else float(borrowing),
            None if lending is None else float(lending),
        )
    return out

