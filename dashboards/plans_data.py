"""The Plans page's data: stored plans and the audit log, fresh after the page's own writes.

Why apart from the snapshot cache: plans and audit records are small and change through the
page's own buttons. Waiting for the next multi-GB snapshot after an approval would show the
old status, so after each of our writes the `SnapshotStore.on_write` listener reads them back
through that write connection (an "overlay"), and the page prefers the overlay while it is
newer than the serving snapshot.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.core.config import utcnow
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.dashboards import audit_records

OVERLAY_AUDIT = 500
"""Audit records read back after a write (the Plans page shows at most 50 of one plan)."""
PLAN_AUDIT_SHOWN = 50


@dataclass(frozen=True)
class PlansData:
    """What the Plans page shows: every stored plan, the selected one (or None), its audit
    trail and the latest audit records."""

    records: list[Any]
    selected: str | None
    plan_audit: pl.DataFrame
    audit: pl.DataFrame


@dataclass(frozen=True)
class _Overlay:
    at: datetime
    records: list[Any]
    audit: pl.DataFrame


def read_plans(wh: Warehouse) -> tuple[list[Any], pl.DataFrame]:
    """Stored plan records and the latest `OVERLAY_AUDIT` audit records."""
    from gpuledger.optimizer.plan.store import list_plans

    return list_plans(wh), audit_records(wh, OVERLAY_AUDIT)


def select(records: list[Any], recent: pl.DataFrame, plan_id: str | None, audit_limit: int) -> PlansData:
    """The page's view of `records`: `plan_id` if stored, else the newest plan."""
    ids = [r.plan.id for r in records]
    selected = plan_id if plan_id in ids else (ids[0] if ids else None)
    plan_audit = (
        recent.filter(pl.col("plan_id") == selected).head(PLAN_AUDIT_SHOWN) if selected else recent.head(0)
    )
    return PlansData(records, selected, plan_audit, recent.head(audit_limit))


class PlanOverlay:
    """What our last write read back, kept until a newer snapshot serves."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._overlay: _Overlay | None = None

    def capture(self, wh: Warehouse) -> None:
        """The `on_write` listener: read plans and audit through our own write connection."""
        at = utcnow()
        records, audit = read_plans(wh)
        overlay = _Overlay(at, records, audit)
        with self._guard:
            self._overlay = overlay

    def newer_than(self, moment: datetime) -> tuple[list[Any], pl.DataFrame] | None:
        """The read-back plans and audit, when taken after `moment` (the snapshot's time)."""
        with self._guard:
            overlay = self._overlay
        if overlay is not None and overlay.at > moment:
            return overlay.records, overlay.audit
        return None

    def clear(self) -> None:
        with self._guard:
            self._overlay = None
