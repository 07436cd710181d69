"""The write side of the `plans` table: insert a plan, and move its status with a compare-and-set.

Why a compare-and-set: a status is decided from what the caller read (an admin approves a plan
they saw as `proposed`; the expiry sweep expires a plan it saw as `proposed`). Between that read
and the write another process may have moved the plan — the dashboard opens the file for each
call, so a CLI, a sweep or a second browser can slip in. `change_status` therefore runs
`UPDATE … WHERE plan_id = ? AND status = ?` and writes the new status, the progress and the audit
row in one transaction; when no row matched, nothing at all is written and the caller learns it
lost. Two racing approvals, or an approve racing an expiry, can never both win.

The warehouse cannot import the optimizer's `Plan`: rows travel as JSON text and plain values,
and the allowed transitions are checked by the optimizer's typed store before it calls here.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from gpuledger.warehouse.protocols import WritableWarehouse
from gpuledger.warehouse.queries.plans import PLAN_COLUMNS

if TYPE_CHECKING:
    from gpuledger.warehouse.store import Warehouse


class PlanWarehouse(WritableWarehouse, Protocol):
    """What the plan writes need: a warehouse that can run several statements as one unit."""

    def transaction(self) -> AbstractContextManager[Warehouse]: ...


@dataclass(frozen=True)
class NewPlan:
    """One plan row to insert as `proposed` (body: the frozen plan's JSON text)."""

    plan_id: str
    kind: str
    created_at: datetime
    fingerprint: str
    body: str
    status: str = "proposed"


@dataclass(frozen=True)
class StatusChange:
    """Move one plan from `expected` to `new`; `progress` is JSON text, None keeps the stored one."""

    plan_id: str
    expected: str
    new: str
    updated_at: datetime
    progress: str | None
    audit: Mapping[str, Any]


def insert_plan(wh: PlanWarehouse, plan: NewPlan, *, audit: Mapping[str, Any]) -> str | None:
    """Insert `plan` and its audit row in one transaction.

    Returns None when stored, or the body already stored under this id (then nothing is written:
    the caller decides whether that is the same plan or a clash).
    """
    with wh.transaction() as tx:
        existing = tx.query("SELECT body FROM plans WHERE plan_id = ?", [plan.plan_id])
        if existing.height:
            return str(existing.item(0, 0))
        tx.execute(
            "INSERT INTO plans (plan_id, kind, status, created_at, updated_at, fingerprint, body, progress) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
            [plan.plan_id, plan.kind, plan.status, plan.created_at, audit["occurred_at"],
             plan.fingerprint, plan.body],
        )
        tx.append_audit(audit)
    return None


def change_status(wh: PlanWarehouse, change: StatusChange) -> dict[str, Any] | None:
    """Compare-and-set the status, store the progress and append the audit row, all or nothing.

    Returns the updated row (`PLAN_COLUMNS`), or None when the plan was not in `expected` (or is
    gone): then nothing was written.
    """
    with wh.transaction() as tx:
        moved = tx.execute(
            "UPDATE plans SET status = ?, updated_at = ?, progress = coalesce(?, progress) "
            "WHERE plan_id = ? AND status = ? RETURNING plan_id",
            [change.new, change.updated_at, change.progress, change.plan_id, change.expected],
        )
        if len(moved) != 1:
            return None
        tx.append_audit(change.audit)
        frame = tx.query(f"SELECT {PLAN_COLUMNS} FROM plans WHERE plan_id = ?", [change.plan_id])
        row: dict[str, Any] = frame.row(0, named=True)
    return row


@dataclass(frozen=True)
class TwinEffectWrite:
    """Store `body` (JSON text) as the twin effect of the plan `plan_id` with `fingerprint`,
    unless the one stored was measured after `measured_at`."""

    plan_id: str
    fingerprint: str
    measured_at: datetime
    body: str
    audit: Mapping[str, Any]


def set_twin_effect(wh: PlanWarehouse, write: TwinEffectWrite) -> str:
    """Replace the plan's twin effect and append the audit row, in one transaction.

    Returns "stored", "missing" (no such plan), "other-plan" (its fingerprint differs: the effect
    was measured on another body) or "newer" (a later measurement is stored; nothing written).
    """
    with wh.transaction() as tx:
        frame = tx.query("SELECT fingerprint, twin_effect ->> '$.measured_at' AS at FROM plans "
                         "WHERE plan_id = ?", [write.plan_id])
        if not frame.height:
            return "missing"
        fingerprint, stored_at = frame.row(0)
        if fingerprint != write.fingerprint:
            return "other-plan"
        if stored_at is not None and datetime.fromisoformat(str(stored_at)) > write.measured_at:
            return "newer"
        tx.execute("UPDATE plans SET twin_effect = ? WHERE plan_id = ? AND fingerprint = ?",
                   [write.body, write.plan_id, write.fingerprint])
        tx.append_audit(write.audit)
    return "stored"
