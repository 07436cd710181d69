"""Named read queries over stored plans and their audit trail (consumer: the plan store and the
actuator's approval policy).

Why here: the optimizer and the actuator must not speak SQL, and the warehouse cannot import the
optimizer's `Plan`; so these queries return the stored columns as plain dicts (the body and the
progress as JSON text) and the optimizer's typed store turns them into `Plan`s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpuledger.warehouse.protocols import ReadableWarehouse

PLAN_COLUMNS = "plan_id, kind, status, created_at, updated_at, fingerprint, body, progress, twin_effect"
"""The columns every plan query returns, in this order."""

PREVIEW_ACTION = "apply.dry_run"
"""The audit action a successful dry-run preview writes (`actuator.workflow.apply(dry_run=True)`)."""


def plan_row(wh: ReadableWarehouse, plan_id: str) -> dict[str, Any] | None:
    """The stored row of one plan (`PLAN_COLUMNS`), or None when there is no such plan."""
    frame = wh.query(f"SELECT {PLAN_COLUMNS} FROM plans WHERE plan_id = ?", [plan_id])
    return frame.row(0, named=True) if frame.height else None


def plan_rows(
    wh: ReadableWarehouse, *, status: str | None = None, kind: str | None = None,
) -> list[dict[str, Any]]:
    """Stored plans, newest first (then by id), optionally only one status and/or kind."""
    where: list[str] = []
    params: list[str] = []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if kind is not None:
        where.append("kind = ?")
        params.append(kind)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    frame = wh.query(
        f"SELECT {PLAN_COLUMNS} FROM plans {clause} ORDER BY created_at DESC, plan_id", params
    )
    return list(frame.iter_rows(named=True))


def last_preview(wh: ReadableWarehouse, plan_id: str) -> tuple[datetime, str] | None:
    """When and by whom the plan was last previewed successfully (a dry run), or None."""
    frame = wh.query(
        "SELECT occurred_at, actor FROM audit_log WHERE plan_id = ? AND action = ? "
        "AND result = 'dry-run' ORDER BY seq DESC LIMIT 1",
        [plan_id, PREVIEW_ACTION],
    )
    if not frame.height:
        return None
    row = frame.row(0, named=True)
    return row["occurred_at"], str(row["actor"])


def plan_ids_matching(wh: ReadableWarehouse, prefix: str, *, limit: int = 6) -> list[str]:
    """Up to `limit` plan ids starting with `prefix`, newest first (LIKE wildcards escaped)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    frame = wh.query(
        "SELECT plan_id FROM plans WHERE plan_id LIKE ? ESCAPE '\\' "
        "ORDER BY created_at DESC, plan_id LIMIT ?", [escaped + "%", limit],
    )
    return [str(v) for v in frame["plan_id"].to_list()]


def latest_plan_id(wh: ReadableWarehouse) -> str | None:
    """The id of the newest stored plan (by creation time), or None when there is none."""
    frame = wh.query("SELECT plan_id FROM plans ORDER BY created_at DESC, plan_id LIMIT 1")
    return str(frame["plan_id"][0]) if frame.height else None
