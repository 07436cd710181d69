"""How a plan's effect was measured, in the plan contract: the out-of-sample backtest, per team.

Why its own types: a reviewer should be able to check the headline, so the plan carries the
figures it is made of (each held-out window, each team's GPUs and pending time before and after)
and the verdict drawn from them. Any queue system's quota plan fills the same fields
(`optimizer.quota.backtest`, `optimizer.quota.guarantees`); `optimizer.plan.contract` holds one `Evaluation`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

Verdict = Literal["propose", "no_gain", "untested", "unfair"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OriginResult(_Frozen):
    """One rolling origin t: fitted on [history start, t), replayed on [t, end)."""

    start: AwareDatetime
    end: AwareDatetime
    fit_days: float
    pending_before: float
    """GPU-minutes under the current quotas, no borrowing (contention)."""
    pending_after: float
    pending_before_borrowing: float
    pending_after_borrowing: float
    borrowed_before: float
    """GPU-minutes of running work above its queue's nominal, with cohort borrowing."""
    borrowed_after: float

    @property
    def reduction(self) -> float | None:
        return 1 - self.pending_after / self.pending_before if self.pending_before else None


class TeamChange(_Frozen):
    """One team's quota and its out-of-sample pending time (no borrowing), before and after."""

    team: str
    gpus_before: float
    gpus_after: float
    floor_gpus: float
    pending_before: float
    pending_after: float
    demand: float
    """GPU-minutes asked for over the held-out windows."""
    floor_note: str = ""
    """Why the floor is what it is, e.g. "3: kept 20% of 16 for bursts" (`optimizer.quota.guarantees`)."""

    @property
    def rise_share(self) -> float:
        """Pending added by the plan, as a share of the team's own demand (negative: a gain)."""
        if self.demand <= 0:
            return 0.0 if self.pending_after <= self.pending_before else float("inf")
        return (self.pending_after - self.pending_before) / self.demand


class Evaluation(_Frozen):
    method: str
    origins: tuple[OriginResult, ...] = ()
    held_out_days: float = 0.0
    pending_before: float = 0.0
    pending_after: float = 0.0
    borrowed_gpu_hours_before: float = 0.0
    borrowed_gpu_hours_after: float = 0.0
    in_sample_pending_before: float | None = None
    in_sample_pending_after: float | None = None
    max_rise_share: float = 0.0
    """The worst queue's out-of-sample pending rise over its demand, either replay mode."""
    rise_bound: float = 0.05
    min_gain: float = 0.05
    teams: tuple[TeamChange, ...] = ()
    verdict: Verdict = "propose"
    reason: str = ""
    headline: str = ""
    standing_rise_share: float | None = None
    """With a fairness reference (the quotas a team would otherwise have, e.g. the static ones
    before a chain of re-plans): the worst queue's held-out rise under the quotas in force over
    the reference, as a share of its demand. None: the current quotas are the reference."""
    plan_rise_share: float | None = None
    """The same for the fitted quotas."""
    fairness_correction: bool = False
    """Proposed because the quotas in force break the bound against the reference and the plan
    narrows the breach, although the pending gain is below `min_gain`."""
    repaired_queues: tuple[str, ...] = ()
    """Queues whose floors the held-out check raised (`optimizer.quota.held_out`)."""
    repair_rounds: int = 0

    @property
    def reduction(self) -> float | None:
        return 1 - self.pending_after / self.pending_before if self.pending_before else None

    def spread(self) -> tuple[float, float] | None:
        """The lowest and highest reduction over the origins (None: no origin had pending)."""
        values = [r for r in (o.reduction for o in self.origins) if r is not None]
        return (min(values), max(values)) if values else None


def headline(e: Evaluation) -> str:
    """'under contention (no borrowing) pending GPU-hours A → B (−x%) over N held-out days;
    reliance on borrowed quota C → D GPU-hours', with the spread across origins: one unit for
    people (the model counts GPU-minutes; issue 32)."""
    if not e.origins:
        return "not tested out of sample: " + (e.reason or "no held-out days")
    cut = e.reduction
    change = f" ({-cut:+.1%})" if cut is not None else ""
    spread = e.spread()
    prefix = ""
    if e.fairness_correction and e.standing_rise_share is not None and e.plan_rise_share is not None:
        prefix = (f"fairness correction: worst team's added pending vs the reference quotas "
                  f"{e.standing_rise_share:+.1%} → {e.plan_rise_share:+.1%} of its demand "
                  f"(bound {e.rise_bound:.0%}); ")
    across = ""
    if spread is not None and len(e.origins) > 1:
        across = f", {-spread[1]:+.1%} to {-spread[0]:+.1%} across {len(e.origins)} origins"
    return (f"{prefix}under contention (no borrowing) pending GPU-hours {e.pending_before / 60:,.1f} → "
            f"{e.pending_after / 60:,.1f}{change}{across} over {e.held_out_days:g} held-out days; "
            f"reliance on borrowed quota {e.borrowed_gpu_hours_before:,.1f} → "
            f"{e.borrowed_gpu_hours_after:,.1f} GPU-hours")

