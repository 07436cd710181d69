"""Quota rebalancing: from queues and demand history to a frozen `Plan` of kind `quota`.

1. Check the guaranteed minimums against capacity, per cohort (`optimizer.quota.fit`).
2. Fit the quotas on the whole lookback: forecast, floors from each queue's own demand and
   quota, the lexicographic model, the fairness repair (`optimizer.quota.fit`,
   `optimizer.quota.guarantees`).
3. Measure the same fit out of sample: rolling origins, each fitted on its past and replayed on
   the next window, without and with borrowing (`optimizer.quota.backtest`). That, never the
   in-sample replay, is the plan's effect; the in-sample figure is kept as a baseline. A queue
   that loses more than the bound on those held-out days gets its floors raised from them and
   everything is fitted and measured again (`optimizer.quota.held_out`).
4. Judge it (`optimizer.quota.verdict`): the headline, winners and losers per team, whether
   the gain is worth proposing (`plans.quota.min_gain_share`) and whether it is fair out of
   sample.
5. Write each changed queue's whole new quota body through its queue system's reader (Kueue
   treats `resourceGroups` as one atomic value), keeping everything but the planned numbers.
6. Baselines on the same held-out days: cohort borrowing, demand-proportional quotas.
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
from gpuledger.core.config_plans import QuotaPlanSettings
from gpuledger.core.errors import InputError
from gpuledger.optimizer.plan.contract import (
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
from gpuledger.optimizer.plan.evaluation import Evaluation
from gpuledger.optimizer.quota.backtest import DAY, Backtest, Split, combine, rolling_splits
from gpuledger.optimizer.quota.demand import Demand
from gpuledger.optimizer.quota.fit import FitResult, FitSpec, build_problem, guaranteed_minimums, old_quotas
from gpuledger.optimizer.quota.forecast import LEVELS
from gpuledger.optimizer.quota.held_out import fair_fit
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.replay import QuotaSet, ReplayResult, cached_grid, coarsen, replay_many
from gpuledger.optimizer.quota.spec import Quota
from gpuledger.optimizer.quota.verdict import evaluate
from gpuledger.optimizer.solver_status import check_solver_limits

__all__ = ["QuotaOptions", "build_problem", "plan_quota", "proportional_quotas"]

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
    fairness_reference: Any = None
    """Quotas no queue may be made worse off than (`FitSpec.reference`); None: the current ones."""

    def __post_init__(self) -> None:
        """Refuse limits no run can honour, and horizons whose forecast would not fit memory."""
        check_solver_limits(self.time_limit_s, self.workers)
        if not timedelta(0) < self.horizon <= MAX_HORIZON:
            raise InputError(f"horizon {self.horizon}: expected more than 0 and at most "
                             f"{MAX_HORIZON.days} days")


def plan_quota(inputs: QuotaInputs, options: QuotaOptions, settings: Settings, now: datetime) -> Plan:
    """Steps 1-6 of the module docstring."""
    warnings: list[str] = []
    rules = settings.plans.quota
    inputs = coarsen(inputs)  # replays bucket at RESOLUTION anyway: do it once
    guaranteed = guaranteed_minimums(inputs, settings, warnings)
    splits, reason = _splits(inputs, options, rules)
    spec = FitSpec(options.horizon, _levels(options.levels), guaranteed, rules,
                   options.time_limit_s / (len(splits) + 1), options.workers, options.fairness_reference)
    fit, bt, repair, reference = fair_fit(inputs, spec, splits, reason,
                                          repair=options.replay_history is None)
    warnings.extend(fit.warnings)
    old = old_quotas(inputs)
    changes = _changes(inputs, old, fit.new)
    evaluation = evaluate(inputs, old, fit, bt, rules, changed=any(c.changed for c in changes),
                          reference=reference, repair=repair)
    warnings.extend(_fairness_warnings(evaluation))
    reader = inputs.reader
    kind = cast(Any, reader.object_kind)  # validated by the plan contract's list of kinds
    observed = tuple(
        ObservedObject(kind=kind, name=q.name, resource_version=q.resource_version,
                       state=state_hash(reader.observed_state(q)))
        for q in inputs.queues
    )
    fingerprint = fingerprint_of(observed)
    body = QuotaChanges(quotas=changes, cluster_queues=_updates(inputs, changes, fit.new))
    fc = fit.forecast
    return Plan(
        id=new_plan_id("quota", now, fingerprint, state_hash(body.model_dump(mode="json"))),
        kind="quota", created_at=now, fingerprint=fingerprint, observed=observed,
        inputs={
            "queues and history": inputs.source,
            "forecast": f"ridge on hour-of-day + day-of-week, {fc.hours} h horizon, quantiles "
                        + ", ".join(f"p{round(q * 100)}" for q in fc.levels),
            "effect": evaluation.method,
            "floors": _floors_text(rules, options.horizon),
        },
        changes=body, effect=_effect(bt), evaluation=evaluation,
        solver=SolverInfo(status=fit.solution.status, wall_s=round(fit.solution.wall_s, 3),
                          time_limit_s=options.time_limit_s, stages=tuple(fit.solution.stages)),
        baselines=_baselines(inputs, fit, bt, splits),
        warnings=tuple(warnings),
    )


def _splits(inputs: QuotaInputs, options: QuotaOptions, rules: QuotaPlanSettings
            ) -> tuple[list[Split], str]:
    """The backtest's origins; one fixed split when a held-out history is given."""
    if options.replay_history is not None:
        test = options.replay_history
        grid = test if isinstance(test, Demand) else cached_grid(test, inputs.step)
        fit_days = round((grid.start - inputs.demand.start) / DAY, 3)
        return [Split(inputs, grid, grid.start, grid.end, fit_days)], ""
    window = timedelta(days=rules.backtest_days) if rules.backtest_days else options.horizon
    return rolling_splits(inputs, window, rules.backtest_origins, timedelta(days=rules.min_fit_days))


def _floors_text(rules: QuotaPlanSettings, horizon: timedelta) -> str:
    """The floor rule in one line (`optimizer.quota.guarantees`, decision 0170)."""
    from gpuledger.optimizer.plan.render import duration_text

    return (f"the larger of p{round(rules.floor_quantile * 100)} of each queue's own demand and "
            f"{rules.floor_keep_share:.0%} of its quota kept for bursts (released to its peak + "
            f"{rules.floor_burst_share:.0%} after {rules.floor_evidence_windows} x "
            f"{duration_text(horizon)} without a need for it), at most its current quota"
            + ("" if rules.allow_zero_quota else "; never zero"))


def _effect(bt: Backtest) -> Effect:
    """The plan's expected effect: the held-out replay without borrowing, or nothing measured."""
    if bt.before is None or bt.after is None:
        return Effect()
    return Effect(
        pending_gpu_minutes_before=round(bt.before.pending_gpu_minutes, 1),
        pending_gpu_minutes_after=round(bt.after.pending_gpu_minutes, 1),
        idle_quota_gpu_minutes_before=round(bt.before.idle_quota_gpu_minutes, 1),
        idle_quota_gpu_minutes_after=round(bt.after.idle_quota_gpu_minutes, 1),
    )


def _baselines(inputs: QuotaInputs, fit: FitResult, bt: Backtest, splits: list[Split]
               ) -> tuple[Baseline, ...]:
    """The in-sample replay (for comparison only), borrowing, and proportional quotas held out;
    each name says which replay mode and which days its figures are from."""
    old_hard, new_hard, _, _ = fit.in_sample
    out = [_baseline("in-sample: the fitting history, hard quotas (no borrowing); not the expected effect",
                     old_hard, new_hard, "the history the quotas were fitted on")]
    if bt.before_borrowing is not None and bt.after_borrowing is not None:
        out.append(_baseline("this plan with cohort borrowing (held out)", bt.before_borrowing,
                             bt.after_borrowing,
                             "the same held-out days, queues borrowing within their cohort"))
    if splits:
        proportional = combine([
            replay_many(inputs, [proportional_quotas(s.train)], borrowing=False, history=s.test)[0]
            for s in splits])
        out.append(Baseline(name="nominal proportional to mean demand (held out, hard quotas: no borrowing)",
                            figures={
            "pending_gpu_minutes_after": round(proportional.pending_gpu_minutes, 1),
            "idle_quota_gpu_minutes_after": round(proportional.idle_quota_gpu_minutes, 1),
        }, note="fitted on the same days, equal capacity"))
    return tuple(out)


def _fairness_warnings(e: Evaluation) -> list[str]:
    worst = [t for t in e.teams if t.rise_share > e.rise_bound + 1e-9]
    if not worst or not e.origins:
        return []
    names = ", ".join(f"{t.team} +{t.rise_share:.1%}" for t in worst[:5])
    return [f"out of sample, {len(worst)} team(s) wait more by over {e.rise_bound:.0%} of their own "
            f"demand: {names}"]


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


def _levels(levels: tuple[float, ...]) -> tuple[float, ...]:
    if not levels or any(not 0 < q < 1 for q in levels):
        raise InputError(f"forecast quantile levels {levels}: expected values in (0, 1)")
    return tuple(sorted(set(levels)))


def _baseline(name: str, before: ReplayResult, after: ReplayResult, note: str) -> Baseline:
    return Baseline(name=name, figures={
        "pending_gpu_minutes_before": round(before.pending_gpu_minutes, 1),
        "pending_gpu_minutes_after": round(after.pending_gpu_minutes, 1),
        "idle_quota_gpu_minutes_after": round(after.idle_quota_gpu_minutes, 1),
    }, note=note)


def proportional_quotas(inputs: QuotaInputs) -> QuotaSet:
    """A simple baseline: each pool's capacity split in proportion to mean demand
    (largest remainder), limits as currently configured."""
    grid = inputs.demand
    sampled = grid.sampled  # mean over all sample times: absent samples count as no demand
    means = sampled.mean(axis=0) if sampled.shape[0] else np.zeros(len(grid.keys))
    out: dict[tuple[str, str, str], Quota] = {}
    pools: dict[tuple[str, str, str], list[tuple[str, Quota]]] = defaultdict(list)
    for q in inputs.queues:
        for (f, r), quota in q.quotas.items():
            pools[(q.pool, f, r)].append((q.name, quota))
    for (pool, f, r), members in pools.items():
        cap = math.floor(inputs.capacity.get((pool, f, r), 0.0) + 1e-9)
        mean = [_at(means, grid.index((name, f, r))) for name, _ in members]
        total = sum(mean)
        raw = [cap * m / total if total else cap / len(members) for m in mean]
        floors = [math.floor(x) for x in raw]
        order = sorted(range(len(raw)), key=lambda k: (-(raw[k] - floors[k]), k))
        for k in order[: cap - sum(floors)]:
            floors[k] += 1
        for (name, quota), n in zip(members, floors, strict=True):
            out[(name, f, r)] = Quota(float(n), quota.borrowing_limit, quota.lending_limit)
    return out


def _at(values: np.ndarray, i: int | None) -> float:
    return 0.0 if i is None else float(values[i])
