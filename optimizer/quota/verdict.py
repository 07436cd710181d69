"""From a fit and its backtest to the plan's `Evaluation`: headline, teams, verdict.

Why a verdict: a plan that moves quota without a measured gain asks a reviewer to trust
churn. Below `plans.quota.min_gain_share` of held-out pending time (or with nothing pending
under contention, or no held-out days to measure on) the optimizer proposes nothing and says
why; the plan is still computed so the reviewer can see what was tried.

Fairness is judged on the held-out days too (`optimizer.quota.held_out`, decision 0171): a plan
some queue still loses by more than `max_pending_rise_share` of its held-out demand after the
repair is refused (`unfair`), naming the queues; a repaired one says which floors were raised.

One exception, a fairness correction: when a fairness reference is given (the quotas a team
would otherwise have; a chain of weekly re-plans passes the static quotas before the first),
the quotas in force may have aged under drift until some queue waits more than
`max_pending_rise_share` of its demand beyond what the reference would give it. Then a plan
that narrows that breach is proposed even without a pending gain, and says so in its headline:
the bound is a promise to each team, the gain only a reason to churn. Without a reference the
current quotas are the reference, they never breach it, and the rules are as above.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuledger.core.config_plans import QuotaPlanSettings
from gpuledger.optimizer.plan.evaluation import Evaluation, Verdict, headline
from gpuledger.optimizer.quota.backtest import Backtest
from gpuledger.optimizer.quota.fit import FitResult
from gpuledger.optimizer.quota.guarantees import QuotaKey, rise_shares, team_changes
from gpuledger.optimizer.quota.held_out import Repair
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.replay import ReplayResult
from gpuledger.optimizer.quota.spec import Quota


def evaluate(inputs: QuotaInputs, old: Mapping[QuotaKey, Quota], fit: FitResult, bt: Backtest,
             rules: QuotaPlanSettings, *, changed: bool,
             reference: tuple[ReplayResult, ReplayResult] | None = None,
             repair: Repair | None = None) -> Evaluation:
    """The figures the plan reports, all from the held-out windows when there are any.

    `reference`: the held-out replays (no borrowing, borrowing) under the fairness reference
    quotas, when they are not the current ones; `repair`: what the held-out fairness check
    found and raised."""
    old_hard, new_hard, *_ = fit.in_sample
    tested = bt.before is not None and bt.after is not None
    before = bt.before if bt.before is not None else old_hard
    after = bt.after if bt.after is not None else new_hard
    pairs = [(before, after)]
    if bt.before_borrowing is not None and bt.after_borrowing is not None:
        pairs.append((bt.before_borrowing, bt.after_borrowing))
    worst = max((share for b, a in pairs for share in rise_shares(b, a).values()), default=0.0)
    verdict, reason = _verdict(bt, rules, changed)
    standing, planned = _reference_rises(bt, reference)
    correction = (verdict == "no_gain" and changed and standing is not None and planned is not None
                  and standing > rules.max_pending_rise_share + 1e-9 and planned < standing - 1e-9)
    if correction:
        verdict, reason = "propose", (
            f"fairness correction: under the quotas in force the worst queue waits {standing:+.1%} "
            f"of its demand more than under the reference quotas (bound "
            f"{rules.max_pending_rise_share:.0%}), under the plan {planned:+.1%}; " + reason)
    verdict, reason = _held_out_fairness(verdict, reason, repair, rules, correction and tested)
    method = (f"rolling-origin backtest: {len(bt.origins)} origin(s), each fitted on its past and "
              f"replayed on the next {bt.held_out_days / max(1, len(bt.origins)):g} days"
              if tested else "not tested out of sample (" + reason + ")")
    e = Evaluation(
        method=method, origins=bt.origins, held_out_days=bt.held_out_days,
        pending_before=round(before.pending_gpu_minutes, 1) if tested else 0.0,
        pending_after=round(after.pending_gpu_minutes, 1) if tested else 0.0,
        borrowed_gpu_hours_before=round(bt.before_borrowing.borrowed_gpu_minutes / 60, 1)
        if bt.before_borrowing else 0.0,
        borrowed_gpu_hours_after=round(bt.after_borrowing.borrowed_gpu_minutes / 60, 1)
        if bt.after_borrowing else 0.0,
        in_sample_pending_before=round(old_hard.pending_gpu_minutes, 1),
        in_sample_pending_after=round(new_hard.pending_gpu_minutes, 1),
        max_rise_share=round(worst, 4) if worst != float("inf") else 1.0,
        rise_bound=rules.max_pending_rise_share, min_gain=rules.min_gain_share,
        teams=team_changes(inputs.queues, old, fit.new, fit.floors, before=before, after=after),
        verdict=verdict, reason=reason, fairness_correction=correction,
        standing_rise_share=None if standing is None else round(min(standing, 1.0), 4),
        plan_rise_share=None if planned is None else round(min(planned, 1.0), 4),
        repaired_queues=tuple(sorted({k[0] for k in repair.raised})) if repair else (),
        repair_rounds=repair.rounds if repair else 0,
    )
    return e.model_copy(update={"headline": headline(e)})


def _reference_rises(bt: Backtest, reference: tuple[ReplayResult, ReplayResult] | None
                     ) -> tuple[float | None, float | None]:
    """The worst queue's held-out rise over the reference, under the quotas in force and under
    the plan, in either replay mode (None, None: no reference or no held-out days)."""
    if reference is None or bt.before is None or bt.after is None:
        return None, None
    ref_hard, ref_borrowing = reference

    def worst(hard: ReplayResult, borrowing: ReplayResult | None) -> float:
        pairs = [(ref_hard, hard)] + ([(ref_borrowing, borrowing)] if borrowing is not None else [])
        return max((share for b, a in pairs for share in rise_shares(b, a).values()), default=0.0)

    return worst(bt.before, bt.before_borrowing), worst(bt.after, bt.after_borrowing)


def _verdict(bt: Backtest, rules: QuotaPlanSettings, changed: bool) -> tuple[Verdict, str]:
    """Propose only for a held-out gain of at least `min_gain_share` of pending time."""
    if bt.before is None or bt.after is None:
        return "untested", bt.reason or "no held-out days"
    before, after = bt.before.pending_gpu_minutes, bt.after.pending_gpu_minutes
    if before <= 1e-9:
        return "no_gain", "nothing was pending under contention on the held-out days"
    if not changed:
        return "no_gain", "the fitted quotas equal the current ones"
    gain = 1 - after / before
    if gain < rules.min_gain_share:
        return "no_gain", (f"the out-of-sample gain, {gain:.1%} of pending GPU time, is below "
                           f"plans.quota.min_gain_share ({rules.min_gain_share:.0%})")
    return "propose", f"out-of-sample gain {gain:.1%} of pending GPU time"


def _held_out_fairness(verdict: Verdict, reason: str, repair: Repair | None, rules: QuotaPlanSettings,
                       correction: bool) -> tuple[Verdict, str]:
    """A proposal some queue still loses on held-out days is refused (a fairness correction,
    which narrows a standing breach, is not: refusing it would keep the worse quotas in force);
    a repaired one says so."""
    if repair is None or verdict == "untested":
        return verdict, reason
    if repair.left and verdict == "propose" and not correction:
        names = ", ".join(f"{q} {share:+.1%}" for q, share in list(repair.left.items())[:5])
        how = (f"after {repair.rounds} repair round(s) of their floors" if repair.repairable
               else "(a fixed held-out history is never repaired from)")
        return "unfair", (f"out of sample {len(repair.left)} queue(s) wait more than "
                          f"{rules.max_pending_rise_share:.0%} of their own demand {how}: {names}; " + reason)
    if repair.raised and not repair.left:
        names = ", ".join(sorted({k[0] for k in repair.raised})[:5])
        reason += (f"; held-out fairness repaired in {repair.rounds} round(s): floors of {names} "
                   "raised to what their held-out days needed, plus a burst allowance")
    return verdict, reason
