"""Racing status changes across two real processes: exactly one wins, and only it is audited.

DuckDB lets one process write a file at a time, so a race between two writers happens where the
dashboard lives: each call opens the file and closes it again (`dashboards.actions.
ShortWriteWarehouse`), so between the read a decision is made from and the write of that
decision, another process can move the plan. The contenders here open the file per call in
the same way, run the real workflow (`actuator.workflow.approve`, `optimizer.plan.store.
expire_plans`), and meet at a barrier after both have read the plan as `proposed` and before
either writes.

Cases:
- two admins approve the same proposed plan: one approval is stored, the other gets
  `ConflictingPlanError` naming the status it lost to; the audit log has exactly one
  `plan.status` row, the winner's;
- an approve races an expiry sweep (the approver still sees the plan as fresh, the sweep as too
  old): exactly one of them moves it, the status is that one's, one audit row.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.core.errors import ConflictingPlanError, WarehouseLockedError
from gpuledger.warehouse import LoadBatch, LoadStats, Warehouse

T0 = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)
PLAN_ID = "quota-race"
LOCK_WAIT_S = 60.0


class PerCallWarehouse:
    """Opens the file for each call, like the dashboard's `ShortWriteWarehouse`; the first write
    transaction waits at `barrier` first, so both contenders have read before either writes."""

    def __init__(self, path: Path, barrier: Any) -> None:
        self.path = str(path)
        self.read_only = False
        self._barrier = barrier

    @contextmanager
    def _open(self) -> Iterator[Warehouse]:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                wh = Warehouse.open(self.path)
                break
            except WarehouseLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)  # the other contender holds the one writer lock: wait our turn
        try:
            yield wh
        finally:
            wh.close()

    def query(self, sql: str, params: Any = None) -> Any:
        with self._open() as wh:
            return wh.query(sql, params)

    def scalar(self, sql: str, params: Any = None) -> Any:
        with self._open() as wh:
            return wh.scalar(sql, params)

    def count(self, table: str) -> int:
        with self._open() as wh:
            return wh.count(table)

    def watermark(self, source: str) -> datetime | None:
        with self._open() as wh:
            return wh.watermark(source)

    def load(self, batch: LoadBatch) -> LoadStats:
        with self._open() as wh:
            return wh.load(batch)

    def append_audit(self, entry: Mapping[str, Any]) -> int:
        with self._open() as wh:
            return wh.append_audit(entry)

    @contextmanager
    def transaction(self) -> Iterator[Warehouse]:
        if self._barrier is not None:
            self._barrier.wait(timeout=LOCK_WAIT_S)
            self._barrier = None
        with self._open() as wh, wh.transaction():
            yield wh


def _contender(path: str, role: str, barrier: Any, results: Any) -> None:
    """One process: `approve` as `role`, or `expire` (the sweep); reports what happened."""
    from gpuledger.actuator.workflow import approve
    from gpuledger.core.access import resolve_roles
    from gpuledger.optimizer.plan.store import expire_plans
    from tests.actuator.conftest import make_settings

    wh = PerCallWarehouse(Path(path), barrier)
    try:
        if role == "expire":
            expired = expire_plans(wh, timedelta(hours=72), now=T0 + timedelta(hours=73), actor="sweep")
            results.put((role, "won" if expired == [PLAN_ID] else "lost", ""))
        else:
            settings = make_settings()
            principal = resolve_roles(role, ["platform"], settings.access)
            approve(wh, PLAN_ID, principal=principal, settings=settings, now=T0 + timedelta(hours=71))
            results.put((role, "won", ""))
    except ConflictingPlanError as exc:
        results.put((role, "lost", str(exc)))
    except Exception as exc:
        results.put((role, "error", f"{type(exc).__name__}: {exc}"))


def _race(path: Path, roles: tuple[str, str]) -> dict[str, tuple[str, str]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_contender, args=(str(path), r, barrier, results)) for r in roles]
    for proc in procs:
        proc.start()
    outcome = {}
    for _ in procs:
        role, verdict, detail = results.get(timeout=120)
        outcome[role] = (verdict, detail)
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    return outcome


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    from gpuledger.optimizer.plan.store import save_plan
    from tests.actuator.test_workflow import offline_plan

    path = tmp_path / "race.duckdb"
    plan = offline_plan(created_at=T0, name="race")
    assert plan.id == PLAN_ID
    with Warehouse.open(path) as wh:
        save_plan(wh, plan, now=T0)
    return path


def _status_rows(path: Path) -> list[dict[str, Any]]:
    with Warehouse.open(path, read_only=True) as wh:
        return wh.query(
            "SELECT actor, before_state, after_state FROM audit_log "
            "WHERE plan_id = ? AND action = 'plan.status' ORDER BY seq", [PLAN_ID],
        ).to_dicts()


def _status(path: Path) -> str:
    with Warehouse.open(path, read_only=True) as wh:
        return str(wh.scalar("SELECT status FROM plans WHERE plan_id = ?", [PLAN_ID]))


def test_two_racing_approvals_one_wins(stored: Path) -> None:
    outcome = _race(stored, ("alice", "carol"))
    verdicts = sorted(v for v, _ in outcome.values())
    assert verdicts == ["lost", "won"], outcome
    winner = next(r for r, (v, _) in outcome.items() if v == "won")
    loser_detail = next(d for v, d in outcome.values() if v == "lost")
    assert "is approved now, not proposed" in loser_detail
    rows = _status_rows(stored)
    assert [r["actor"] for r in rows] == [winner]
    assert json.loads(rows[0]["after_state"]) == {"status": "approved"}
    assert _status(stored) == "approved"


def test_approve_racing_expiry_one_wins(stored: Path) -> None:
    outcome = _race(stored, ("alice", "expire"))
    verdicts = sorted(v for v, _ in outcome.values())
    assert verdicts == ["lost", "won"], outcome
    winner = next(r for r, (v, _) in outcome.items() if v == "won")
    rows = _status_rows(stored)
    assert [r["actor"] for r in rows] == ["sweep" if winner == "expire" else "alice"]
    assert _status(stored) == ("expired" if winner == "expire" else "approved")
    if winner == "expire":
        assert "is expired now, not proposed" in outcome["alice"][1]
