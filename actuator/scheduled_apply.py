"""Scheduled applies of approved MIG plans, only inside their pools' maintenance windows.

A MIG rebuild destroys every instance on a card, so `advice.maintenance_windows` says when a
pool may be rebuilt (`analytics.advice.fragmentation`). `serve --schedule --apply-approved`
calls `apply_due` on every tick of its schedule; this module decides which approved plans are
due at `now` and applies them through the one apply path (`actuator.workflow.apply`, with its
approval policy, preview and audit), as the scheduler's own principal.

Steps of one call:
1. The approved MIG plans, oldest first (quota plans are not rebuilds: never applied here).
2. Each plan's gate (`window_gate`): every node of the plan whose pool has a maintenance
   window must be inside one of its pool's windows at `now`; a plan whose nodes have no
   window configured is not held. A held plan waits for a later tick, untouched.
3. Apply each due plan; a refusal (expired, moved, no preview, not admin) is logged and the
   next plan is tried: the scheduler never stops on one plan.

`now` is injected (the schedule's clock), so the gate is tested without waiting for a window.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpuledger.analytics.advice.fragmentation import inside_window, windows_for
from gpuledger.core.access import Principal, resolve_roles
from gpuledger.core.config import Settings
from gpuledger.core.config_advice import MaintenanceWindow
from gpuledger.core.errors import GpuledgerError
from gpuledger.optimizer.plan.contract import MigChanges, Plan
from gpuledger.warehouse.plans import PlanWarehouse
from gpuledger.warehouse.protocols import ReadableWarehouse

log = logging.getLogger("gpuledger.actuator.scheduled_apply")

SCHEDULER_USER = "system:gpuledger-scheduler"
"""The principal scheduled applies run as: admin only where `access.roles` binds it so."""


@dataclass(frozen=True)
class Due:
    plan_id: str
    held: str | None
    """Why the plan waits (outside a window), or None when it is applied now."""


def window_gate(
    plan: Plan, pools: Mapping[str, str | None], windows: Sequence[MaintenanceWindow], now: datetime,
) -> str | None:
    """Step 2: None when every windowed node of `plan` is inside its pool's window at `now`."""
    if not isinstance(plan.changes, MigChanges):
        return None
    outside = []
    for change in plan.changes.nodes:
        mine = windows_for(pools.get(change.node), windows)
        if mine and not inside_window(now, mine):
            outside.append(change.node)
    if not outside:
        return None
    return f"outside the maintenance window of {', '.join(sorted(outside))} at {now:%a %Y-%m-%d %H:%M} UTC"


def node_pools(wh: ReadableWarehouse) -> dict[str, str | None]:
    from gpuledger.warehouse.queries.dashboards import node_table

    rows = node_table(wh).select("node", "pool").iter_rows()
    return {str(n): (None if p is None else str(p)) for n, p in rows}


def due_plans(wh: ReadableWarehouse, settings: Settings, now: datetime) -> list[Due]:
    """Steps 1-2: the approved MIG plans, oldest first, each with its gate at `now`."""
    from gpuledger.optimizer.plan.store import list_plans

    pools = node_pools(wh)
    records = sorted(list_plans(wh, "approved", kind="mig"), key=lambda r: r.plan.created_at)
    return [Due(r.plan.id, window_gate(r.plan, pools, settings.advice.maintenance_windows, now))
            for r in records]


def scheduler_principal(settings: Settings) -> Principal:
    return resolve_roles(SCHEDULER_USER, (), settings.access)


def apply_due(
    wh: PlanWarehouse, settings: Settings, cluster: object, now: datetime,
) -> list[str]:
    """Step 3: apply the due plans; returns the ids applied (or left failed) by this call."""
    from gpuledger.actuator.gateway import ClusterGateway
    from gpuledger.actuator.workflow import apply

    if not isinstance(cluster, ClusterGateway):
        raise TypeError("apply_due needs a ClusterGateway")
    principal = scheduler_principal(settings)
    done = []
    for due in due_plans(wh, settings, now):
        if due.held is not None:
            log.info("plan %s held: %s", due.plan_id, due.held)
            continue
        try:
            result = apply(wh, due.plan_id, principal=principal, settings=settings, cluster=cluster, now=now)
        except GpuledgerError as exc:
            log.warning("scheduled apply of plan %s refused: %s", due.plan_id, exc)
            continue
        log.info("scheduled apply of plan %s: %s (%s)", due.plan_id, result.status, result.message)
        done.append(due.plan_id)
    return done
