"""Scheduled applies wait for the maintenance window (`actuator.scheduled_apply`), clock injected.

Cases: an approved MIG plan for a node whose pool has a window `sat 01:00-05:00` is held on a
Friday and due on Saturday 02:00 (the gate's answer for both, on a real DuckDB warehouse with
the plan approved through the workflow); a node of a pool with no window is never held; a
plan spanning two pools is due only when both are inside; proposed plans are not listed;
`serve --schedule`'s loop hands the job the same injected `now` as the report tick.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from gpuledger.actuator.scheduled_apply import due_plans, window_gate
from gpuledger.actuator.workflow import approve
from gpuledger.core.access import resolve_roles
from gpuledger.core.config import Settings
from gpuledger.core.config_advice import MaintenanceWindow
from gpuledger.core.frames import NODES
from gpuledger.core.table_spec import polars_schema
from gpuledger.optimizer.plan.contract import Effect, MigChanges, Plan, SolverInfo, fingerprint_of
from gpuledger.optimizer.plan.store import save_plan
from gpuledger.reports.schedule import run_forever
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch
from tests.actuator.helpers import mig_node_change

FRIDAY = datetime(2026, 11, 27, 14, 0, tzinfo=UTC)
SATURDAY_2AM = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
SATURDAY_6AM = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
WINDOW = MaintenanceWindow(pool="a100-*", weekly=("sat 01:00-05:00",))


def _plan(*nodes: str, at: datetime = FRIDAY) -> Plan:
    return Plan(id=f"mig-{'-'.join(nodes)}", kind="mig", created_at=at, fingerprint=fingerprint_of(()),
                changes=MigChanges(nodes=tuple(mig_node_change(n, "all-1g", "1g.10gb", 7) for n in nodes)),
                effect=Effect(), solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30))


POOLS = {"a100-mig-000": "a100-mig", "h100-train-000": "h100-train"}


def test_gate_holds_outside_the_window_and_not_inside():
    plan = _plan("a100-mig-000")
    held = window_gate(plan, POOLS, (WINDOW,), FRIDAY)
    assert held is not None and "a100-mig-000" in held
    assert window_gate(plan, POOLS, (WINDOW,), SATURDAY_2AM) is None
    assert window_gate(plan, POOLS, (WINDOW,), SATURDAY_6AM) is not None  # the window ended at 05:00


def test_a_pool_without_window_is_never_held_and_mixed_plans_wait_for_all():
    assert window_gate(_plan("h100-train-000"), POOLS, (WINDOW,), FRIDAY) is None
    train_window = MaintenanceWindow(pool="h100-*", weekly=("sun 01:00-05:00",))
    both = _plan("a100-mig-000", "h100-train-000")
    assert window_gate(both, POOLS, (WINDOW, train_window), SATURDAY_2AM) is not None  # h100 is outside
    assert window_gate(both, POOLS, (WINDOW, train_window), datetime(2026, 11, 29, 2, tzinfo=UTC)) is not None
    assert window_gate(both, POOLS, (WINDOW,), SATURDAY_2AM) is None


def test_due_plans_on_a_warehouse(tmp_path: Path):
    settings = Settings.model_validate({"advice": {"maintenance_windows": [WINDOW.model_dump()]},
                                        "access": {"roles": [{"subject": "ops", "role": "admin"}]}})
    admin = resolve_roles("ops", (), settings.access)
    schema = polars_schema(NODES)
    nodes = pl.DataFrame({"node": list(POOLS), "pool": list(POOLS.values())}).with_columns(
        pl.lit(FRIDAY).alias("observed_at"), pl.lit("1").alias("resource_version"),
    ).select([pl.col(c).cast(t) if c in ("node", "pool", "observed_at", "resource_version")
              else pl.lit(None, dtype=t).alias(c) for c, t in schema.items()])
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch(frames={"nodes": nodes}))
        approved, proposed = _plan("a100-mig-000"), _plan("h100-train-000", at=SATURDAY_2AM)
        for plan in (approved, proposed):
            save_plan(wh, plan, now=FRIDAY)
        approve(wh, approved.id, principal=admin, settings=settings, now=FRIDAY)
        friday = due_plans(wh, settings, FRIDAY)
        saturday = due_plans(wh, settings, SATURDAY_2AM)
    assert [d.plan_id for d in friday] == [approved.id]  # the proposed plan is not a candidate
    assert friday[0].held is not None and saturday[0].held is None


def test_the_schedule_loop_hands_its_clock_to_the_job(tmp_path: Path):
    stop, seen = threading.Event(), []

    def job(now: datetime) -> None:
        seen.append(now)
        stop.set()

    run_forever(Settings(), tmp_path / "w.duckdb", tmp_path / "out", stop, clock=lambda: SATURDAY_2AM, also=job)
    assert seen == [SATURDAY_2AM]
