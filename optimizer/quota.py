"""Kueue quota rebalancing: from ClusterQueues and demand history to a frozen `Plan` of kind `quota`.

1. Check the guaranteed minimums against capacity, per cohort.
2. Forecast every (queue, flavor, resource) for the horizon (`optimizer.quota_forecast`).
3. Solve the lexicographic quota model (`optimizer.quota_model`).
4. Write each changed ClusterQueue's whole new `resourceGroups` list (Kueue treats it as one
   atomic value), keeping everything but the three planned numbers.
5. Replay the recorded demand against the current quotas, the new ones, hard quotas (current
   nominal, no borrowing) and demand-proportional quotas, and report pending GPU-minutes and
   idle quota for each (`optimizer.quota_replay`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np

from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.optimizer.plan import (
    Baseline,
    ClusterQueueUpdate,
    Effect,
    ObservedObject,
    Plan,
    QuotaChange,
    QuotaChanges,
    SolverInfo,
    fingerprint_of,
    new_plan_id,
    state_hash,
)
from gpuledger.optimizer.quota_forecast import LEVELS, Forecast, forecast
from gpuledger.optimizer.quota_input import QuotaInputs
from gpuledger.optimizer.quota_model import (
    POINTS,
    QuotaProblem,
    QuotaSolution,
    SeriesSpec,
    limits,
    solve_quotas,
)
from gpuledger.optimizer.quota_replay import QuotaSet, ReplayResult, replay
from gpuledger.optimizer.quota_spec import GPU, Quota
from gpuledger.optimizer.solver_status import check_solver_limits

MAX_HORIZON = timedelta(days=366)


@dataclass(frozen=True)
class QuotaOptions:
    time_limit_s: float = 30.0
    horizon: timedelta = timedelta(days=7)
    levels: tuple[float, ...] = LEVELS
    """Forecast quantile levels; every horizon hour at each level is one equally likely scenario."""
    workers: int = 2
    replay_history: Any = None
    """Replay this history instead of the one the forecast was fitted on (held-out evaluation)."""

    def __post_init__(self) -> None:
        """Refuse limits no run can honour, and horizons whose forecast would not fit memory."""
        check_solver_limits(self.time_limit_s, self.workers)
        if not timedelta(0) < self.horizon <= MAX_HORIZON:
            raise InputError(f"horizon {self.horizon}: expected more than 0 and at most "
                             f"{MAX_HORIZON.days} days")


def plan_quota(inputs: QuotaInputs, options: QuotaOptions, settings: Settings, now: datetime) -> Plan:
    """Steps 1-5 of the module docstring."""
    warnings: list[str] = []
    guaranteed = _guaranteed(inputs, settings, warnings)
    fc = forecast(inputs.history, options.horizon, _levels(options.levels))
    problem = build_problem(inputs, fc, guaranteed)
    solution = solve_quotas(problem, options.time_limit_s, options.workers)
    new = new_quotas(problem, solution)
    old = {(q.name, f, r): quota for q in inputs.queues for (f, r), quota in q.quotas.items()}
    changes = _changes(inputs, old, new)
    history = options.replay_history if options.replay_history is not None else None
    effect, baselines = _replays(inputs, old, new, history)
    reader = inputs.reader
    kind = cast(Any, reader.object_kind)  # validated by the plan contract's list of kinds
    observed = tuple(
        ObservedObject(kind=kind, name=q.name, resource_version=q.resource_version,
                       state=state_hash(reader.observed_state(q)))
        for q in inputs.queues
    )
    fingerprint = fingerprint_of(observed)
    body = QuotaChanges(quotas=changes, cluster_queues=_updates(inputs, changes, new))
    return Plan(
        id=new_plan_id("quota", now, fingerprint, state_hash(body.model_dump(mode="json"))),
        kind="quota", created_at=now, fingerprint=fingerprint, observed=observed,
        inputs={
            "queues and history": inputs.source,
            "forecast": f"ridge on hour-of-day + day-of-week, {fc.hours} h horizon, quantiles "
                        + ", ".join(f"p{round(q * 100)}" for q in fc.levels),
            "replay": "held-out history" if history is not None else "the history the forecast was fitted on",
        },
        changes=body, effect=effect,
        solver=SolverInfo(status=solution.status, wall_s=round(solution.wall_s, 3),
                          time_limit_s=options.time_limit_s, stages=tuple(solution.stages)),
        baselines=baselines,
        warnings=tuple(warnings),
    )


QuotaKey = tuple[str, str, str]
"""(queue, flavor, resource)."""


def _changes(inputs: QuotaInputs, old: Mapping[QuotaKey, Quota], new: Mapping[QuotaKey, Quota]
             ) -> tuple[QuotaChange, ...]:
    """One `QuotaChange` per planned (queue, flavor, resource), changed or not, in key order."""
    return tuple(
        QuotaChange(
            cluster_queue=q, cohort=inputs.queue(q).cohort, flavor=f, resource=r,
            old_nominal=old[(q, f, r)].nominal, new_nominal=new[(q, f, r)].nominal,
            old_borrowing_limit=old[(q, f, r)].borrowing_limit,
            new_borrowing_limit=new[(q, f, r)].borrowing_limit,
            old_lending_limit=old[(q, f, r)].lending_limit,
            new_lending_limit=new[(q, f, r)].lending_limit,
        )
        for (q, f, r) in sorted(old)
    )


def _updates(inputs: QuotaInputs, changes: tuple[QuotaChange, ...], new: Mapping[QuotaKey, Quota]
             ) -> tuple[ClusterQueueUpdate, ...]:
    """Step 4: each changed queue's whole new quota body, written by its queue system's reader."""
    reader = inputs.reader
    return tuple(
        ClusterQueueUpdate(name=q.name, resource_version=q.resource_version,
                           resource_groups=reader.rewrite(q, {k[1:]: v for k, v in new.items()
                                                              if k[0] == q.name}))
        for q in inputs.queues if any(c.changed for c in changes if c.cluster_queue == q.name)
    )


def _replays(inputs: QuotaInputs, old: QuotaSet, new: QuotaSet, history: Any
             ) -> tuple[Effect, tuple[Baseline, ...]]:
    """Step 5: the plan's effect and its baselines, replayed on the same demand."""
    before = replay(inputs, old, history=history)
    after = replay(inputs, new, history=history)
    hard = replay(inputs, old, borrowing=False, history=history)
    hard_new = replay(inputs, new, borrowing=False, history=history)
    proportional = replay(inputs, proportional_quotas(inputs), history=history)
    effect = Effect(
        pending_gpu_minutes_before=round(before.pending_gpu_minutes, 1),
        pending_gpu_minutes_after=round(after.pending_gpu_minutes, 1),
        idle_quota_gpu_minutes_before=round(before.idle_quota_gpu_minutes, 1),
        idle_quota_gpu_minutes_after=round(after.idle_quota_gpu_minutes, 1),
    )
    return effect, (
        _baseline("hard quotas (current nominal, no borrowing)", hard),
        _baseline("hard quotas (this plan's nominal, no borrowing)", hard_new),
        _baseline("nominal proportional to mean demand", proportional),
    )


def _levels(levels: tuple[float, ...]) -> tuple[float, ...]:
    if not levels or any(not 0 < q < 1 for q in levels):
        raise InputError(f"forecast quantile levels {levels}: expected values in (0, 1)")
    return tuple(sorted(set(levels)))


def _baseline(name: str, r: ReplayResult) -> Baseline:
    return Baseline(name=name, figures={
        "pending_gpu_minutes_after": round(r.pending_gpu_minutes, 1),
        "idle_quota_gpu_minutes_after": round(r.idle_quota_gpu_minutes, 1),
    }, note="replayed on the same demand, equal capacity")


def _guaranteed(
    inputs: QuotaInputs, settings: Settings, warnings: list[str]
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


def build_problem(inputs: QuotaInputs, fc: Forecast,
                  guaranteed: Mapping[str, tuple[int, list[str]]]) -> QuotaProblem:
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
            ))
    index = {(s.queue, s.flavor, s.resource): i for i, s in enumerate(series)}
    teams = {
        team: (gpus, tuple(i for (qn, _, r), i in index.items() if qn in queues and r == GPU))
        for team, (gpus, queues) in guaranteed.items()
    }
    return QuotaProblem(series=tuple(series), capacity=capacity, guaranteed=teams)


def new_quotas(problem: QuotaProblem, solution: QuotaSolution) -> dict[tuple[str, str, str], Quota]:
    """Solver integers and the closed-form limits → quotas (None: unset)."""
    out = {}
    for spec, n, (borrowing, lending) in zip(problem.series, solution.nominal, limits(problem, solution),
                                             strict=True):
        out[(spec.queue, spec.flavor, spec.resource)] = Quota(
            float(n), None if borrowing is None else float(borrowing),
            None if lending is None else float(lending),
        )
    return out


def proportional_quotas(inputs: QuotaInputs) -> QuotaSet:
    """A simple baseline: each pool's capacity split in proportion to mean demand
    (largest remainder), limits as currently configured."""
    times = inputs.history["ts"].n_unique()
    sums = {  # mean over all sample times: absent samples count as no demand
        (r["cluster_queue"], r["flavor"], r["resource"]): r["demand"]
        for r in inputs.history.group_by("cluster_queue", "flavor", "resource").sum().iter_rows(named=True)
    }
    out: dict[tuple[str, str, str], Quota] = {}
    pools: dict[tuple[str, str, str], list[tuple[str, Quota]]] = defaultdict(list)
    for q in inputs.queues:
        for (f, r), quota in q.quotas.items():
            pools[(q.pool, f, r)].append((q.name, quota))
    for (pool, f, r), members in pools.items():
        cap = math.floor(inputs.capacity.get((pool, f, r), 0.0) + 1e-9)
        mean = [sums.get((name, f, r), 0.0) / times for name, _ in members]
        total = sum(mean)
        raw = [cap * m / total if total else cap / len(members) for m in mean]
        floors = [math.floor(x) for x in raw]
        order = sorted(range(len(raw)), key=lambda k: (-(raw[k] - floors[k]), k))
        for k in order[: cap - sum(floors)]:
            floors[k] += 1
        for (name, quota), n in zip(members, floors, strict=True):
            out[(name, f, r)] = Quota(float(n), quota.borrowing_limit, quota.lending_limit)
    return out
