"""The typed plan store: frozen `Plan`s in, `PlanRecord`s (plan + status + progress) out.

Why apart from the contract (`optimizer.plan.contract`): the Plan types are what the optimizer and the
actuator agree on; storing them is a separate job. The SQL lives in the warehouse
(`warehouse.plans`, `warehouse.queries.plans`), which deals in JSON text; this module checks
the lifecycle (`optimizer.plan.status`) and turns rows into typed records.

Every status change is one compare-and-set transaction (status, progress and audit row
together): `set_status(..., expected=...)` only moves a plan that is still in the status the
caller decided from, and raises `ConflictingPlanError` when another action moved it first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from pydantic import AwareDatetime, BaseModel, ConfigDict

from gpuledger.core.errors import ConflictingPlanError, InputError, PlanError
from gpuledger.optimizer.plan.contract import Plan
from gpuledger.optimizer.plan.status import (
    EXPIRABLE,
    PlanStatus,
    check_status,
    check_transition,
)
from gpuledger.optimizer.plan.twin_effect import TwinEffect
from gpuledger.warehouse.plans import (
    NewPlan,
    PlanWarehouse,
    StatusChange,
    TwinEffectWrite,
    change_status,
    insert_plan,
    set_twin_effect,
)
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries.plans import latest_plan_id, plan_ids_matching, plan_row, plan_rows


class PlanRecord(BaseModel):
    """A stored plan with its mutable status and progress."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan: Plan
    status: PlanStatus
    updated_at: AwareDatetime
    progress: Any = None
    twin_effect: TwinEffect | None = None
    """The latest effect measured on the scheduling twin (`optimizer.plan.twin_effect`), or None."""


def save_plan(
    wh: PlanWarehouse, plan: Plan, *, now: datetime | None = None, actor: str = "optimizer",
) -> None:
    """Store `plan` as `proposed`. Saving the same plan again is a no-op; another body with the
    same id is refused (plans are frozen)."""
    from gpuledger.core.config import utcnow

    moment = now or utcnow()
    audit = {
        "occurred_at": moment, "actor": actor, "plan_id": plan.id, "action": "plan.propose",
        "object": f"plan/{plan.id}", "before_state": None,
        "after_state": json.dumps({"status": "proposed"}), "result": "ok",
        "detail": f"{plan.kind} plan, fingerprint {plan.fingerprint}",
    }
    row = NewPlan(plan_id=plan.id, kind=plan.kind, created_at=plan.created_at,
                  fingerprint=plan.fingerprint, body=plan.to_json())
    existing = insert_plan(wh, row, audit=audit)
    if existing is not None and Plan.from_json(existing) != plan:
        raise PlanError(f"plan {plan.id}: another plan with this id is already stored")


@dataclass(frozen=True)
class Proposal:
    """What `propose_plan` did: stored the plan (superseding older proposals), or nothing."""

    stored: bool
    reason: str = ""
    """Why nothing was stored (the plan's own verdict)."""
    superseded: tuple[str, ...] = ()


def propose_plan(
    wh: PlanWarehouse, plan: Plan, *, now: datetime | None = None, actor: str = "optimizer",
) -> Proposal:
    """Store `plan` as `proposed` unless it says it has no measured gain; older `proposed` plans
    of its kind with the same fingerprint (computed from the same observed state) move to
    `superseded`, so a re-run replaces its copy instead of adding one.

    Why insert first, supersede after: a crash in between leaves two proposals (the next run
    supersedes both), never none. A proposal someone approves meanwhile loses the
    compare-and-set and stays approved.
    """
    reason = plan.proposes_nothing
    if reason is not None:
        return Proposal(stored=False, reason=reason)
    older = [r.plan.id for r in list_plans(wh, "proposed", kind=plan.kind)
             if r.plan.fingerprint == plan.fingerprint and r.plan.id != plan.id]
    save_plan(wh, plan, now=now, actor=actor)
    done = []
    for plan_id in older:
        try:
            set_status(wh, plan_id, "superseded", actor=actor, detail=f"superseded by {plan.id}",
                       now=now, expected="proposed")
        except ConflictingPlanError:
            continue
        done.append(plan_id)
    return Proposal(stored=True, superseded=tuple(done))


def load_record(wh: ReadableWarehouse, plan_id: str) -> PlanRecord:
    """The stored plan with its status and progress (PlanError when absent)."""
    row = plan_row(wh, plan_id)
    if row is None:
        raise PlanError(f"plan {plan_id}: not found in the warehouse table plans")
    return _record(row)


def resolve_plan_id(wh: ReadableWarehouse, text: str) -> str:
    """A full plan id from what a user typed: the id, a unique prefix of one, or `latest` (the
    newest plan). Ids are long hashes nobody retypes; an ambiguous prefix is an input error that
    lists the candidates, an unknown one the usual "not found"."""
    wanted = text.strip()
    if wanted.lower() == "latest":
        newest = latest_plan_id(wh)
        if newest is None:
            raise PlanError("plan latest: no plans stored in the warehouse table plans")
        return newest
    if not wanted:
        raise InputError("plan id: empty; give an id, a unique prefix of one, or 'latest'")
    if plan_row(wh, wanted) is not None:
        return wanted
    found = plan_ids_matching(wh, wanted)
    if len(found) == 1:
        return found[0]
    if not found:
        raise PlanError(f"plan {wanted}: not found in the warehouse table plans")
    more = ", ..." if len(found) > 5 else ""
    raise InputError(f"plan {wanted}: ambiguous prefix, matches {', '.join(found[:5])}{more}; "
                     "type more of the id")


def load_plan(wh: ReadableWarehouse, plan_id: str) -> Plan:
    """The frozen plan with this id (PlanError when absent)."""
    return load_record(wh, plan_id).plan


def list_plans(
    wh: ReadableWarehouse, status: str | None = None, *, kind: str | None = None
) -> list[PlanRecord]:
    """Stored plans, newest first, optionally only those in `status` / of `kind`."""
    if status is not None:
        check_status(status)
    return [_record(row) for row in plan_rows(wh, status=status, kind=kind)]


def set_status(
    wh: PlanWarehouse, plan_id: str, status: str, progress: Any = None, *,
    actor: str = "gpuledger", detail: str | None = None, now: datetime | None = None,
    expected: str | None = None,
) -> PlanRecord:
    """Move a plan to `status`, checked against `TRANSITIONS`, in one compare-and-set transaction.

    `expected` is the status the caller decided from (default: the one read here). `progress`
    (JSON-able) is stored with the move, or kept when None; the audit row lands in the same
    transaction. Raises `ConflictingPlanError` when the plan is no longer in `expected`.
    """
    from gpuledger.core.config import utcnow

    current = expected if expected is not None else load_record(wh, plan_id).status
    check_transition(plan_id, current, status)
    moment = now or utcnow()
    change = StatusChange(
        plan_id=plan_id, expected=current, new=status, updated_at=moment,
        progress=None if progress is None else json.dumps(progress, default=str),
        audit={
            "occurred_at": moment, "actor": actor, "plan_id": plan_id, "action": "plan.status",
            "object": f"plan/{plan_id}", "before_state": json.dumps({"status": current}),
            "after_state": json.dumps({"status": status}), "result": "ok", "detail": detail,
        },
    )
    row = change_status(wh, change)
    if row is None:
        _lost(wh, plan_id, current, status)
    return _record(row)


def _lost(wh: ReadableWarehouse, plan_id: str, expected: str, status: str) -> NoReturn:
    """Raise the error for a compare-and-set that matched nothing."""
    now_row = plan_row(wh, plan_id)
    if now_row is None:
        raise PlanError(f"plan {plan_id}: not found in the warehouse table plans")
    raise ConflictingPlanError(
        f"plan {plan_id}: is {now_row['status']} now, not {expected}: another action moved it "
        f"first; not moved to {status}"
    )


def expire_plans(
    wh: PlanWarehouse, max_age: timedelta, *, now: datetime | None = None, actor: str = "gpuledger",
) -> list[str]:
    """Mark `proposed` / `approved` plans older than `max_age` as `expired`; returns their ids.

    A plan another action moves meanwhile (approved, rejected) is left to that action: the
    compare-and-set loses and the sweep goes on.
    """
    from gpuledger.core.config import utcnow

    moment = now or utcnow()
    expired = []
    for record in list_plans(wh):
        if record.status in EXPIRABLE and moment - record.plan.created_at > max_age:
            try:
                set_status(wh, record.plan.id, "expired", actor=actor, detail=f"older than {max_age}",
                           now=moment, expected=record.status)
            except ConflictingPlanError:
                continue
            expired.append(record.plan.id)
    return expired


def attach_twin_effect(
    wh: PlanWarehouse, effect: TwinEffect, *, actor: str = "twin", now: datetime | None = None,
) -> PlanRecord:
    """Store `effect` as the plan's twin effect, replacing an earlier one (re-running a judge is
    safe), with an audit row. Refused (PlanError) when the plan is absent, is not the body the
    effect was measured on (another fingerprint), or holds a measurement taken later."""
    from gpuledger.core.config import utcnow

    audit = {
        "occurred_at": now or utcnow(), "actor": actor, "plan_id": effect.plan_id,
        "action": "plan.twin_effect", "object": f"plan/{effect.plan_id}", "before_state": None,
        "after_state": json.dumps({"measured_at": effect.measured_at.isoformat(),
                                   "window_start": effect.window_start.isoformat(),
                                   "window_end": effect.window_end.isoformat()}),
        "result": "ok", "detail": f"measured by {effect.measured_by}",
    }
    outcome = set_twin_effect(wh, TwinEffectWrite(
        plan_id=effect.plan_id, fingerprint=effect.plan_fingerprint, measured_at=effect.measured_at,
        body=effect.to_json(), audit=audit))
    if outcome == "missing":
        raise PlanError(f"plan {effect.plan_id}: not found in the warehouse table plans")
    if outcome == "other-plan":
        raise PlanError(f"plan {effect.plan_id}: the twin measured fingerprint {effect.plan_fingerprint}, "
                        "the stored plan has another; not attached")
    if outcome == "newer":
        raise ConflictingPlanError(f"plan {effect.plan_id}: a twin effect measured after "
                                   f"{effect.measured_at.isoformat()} is stored; not replaced")
    return load_record(wh, effect.plan_id)


def _record(row: Mapping[str, Any]) -> PlanRecord:
    progress = json.loads(row["progress"]) if row.get("progress") else None
    twin = row.get("twin_effect")
    return PlanRecord(
        plan=Plan.from_json(row["body"]), status=row["status"], updated_at=row["updated_at"],
        progress=progress, twin_effect=TwinEffect.from_json(twin) if twin else None,
    )
