"""Top idle allocations and recommendations for the statements.

Both come from analytics (`analytics.workloads.idle.idle_allocations`,
`analytics.workloads.recommend.recommend`), computed from the same bill as the report, so a
statement's idle figures are the bill's. This module only turns their frames into the small
rows a statement shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.reports.billing import MonthBill
from gpuledger.reports.statement import IdleRow, Recommendation
from gpuledger.warehouse import Warehouse

if TYPE_CHECKING:
    from gpuledger.analytics.workloads.recommend import Recommendations

_ACTIONS = {
    "whole_to_mig": "To MIG",
    "rightsize_mig": "Smaller slice",
}
"""Wording for the kinds analytics emits; other kinds are shown as their name in words."""


def _holder(row: dict[str, Any]) -> str:
    """`namespace/workload` (a Deployment, Job or notebook), else `namespace/pod`."""
    name = row.get("workload") or row.get("pod")
    return f"{row['namespace']}/{name}" if name else str(row.get("namespace"))


def idle_rows(bill: MonthBill, workloads: pl.DataFrame | None = None) -> list[IdleRow]:
    """Every workload that sat idle this month (`analytics.workloads.idle.idle_workloads`: replicas and
    cards of one workload summed), largest idle cost first; per pod without `workloads`."""
    from gpuledger.analytics.workloads.idle import held_allocations, idle_workloads

    return [
        IdleRow(
            team=str(r["team"]),
            holder=_holder(r),
            device=f"{r['model']} · {r['gpus']} GPU(s)" if r["gpus"] > 1 else str(r["model"]),
            idle_card_hours=float(r["idle_card_hours"]),
            idle_cost=float(r["idle_cost"]),
            idle_fraction=float(r["idle_fraction"] or 0.0),
        )
        for r in idle_workloads(held_allocations(bill.raw), workloads).iter_rows(named=True)
    ]


def recommendation_rows(wh: Warehouse, bill: MonthBill, settings: Settings, *,
                        usage: pl.DataFrame | None = None,
                        found: Recommendations | None = None) -> list[Recommendation]:
    """Right-sizing and reclaim recommendations with their monthly savings, largest first
    (`usage`: the bill's per-allocation usage, when the caller read it already; `found`: the
    month's recommendations from that usage, when the caller computed them already)."""
    from gpuledger.analytics.workloads.recommend import recommend

    found = found or recommend(wh, bill.window, settings, bill=bill.raw, usage=usage)
    out = []
    for r in found.recommendations.iter_rows(named=True):
        kind = str(r["kind"])
        target = str(r["recommended"] or "")
        # A profile name is a change of device ("3g.40gb → 1g.10gb"); other targets are advice
        # in words already ("release the card").
        if " " in target or not target:
            action = (target or kind.replace("_", " ")).capitalize()
        else:
            action = f"{_ACTIONS.get(kind, kind.replace('_', ' ').capitalize())}: {r['current']} → {target}"
        out.append(Recommendation(
            team=None if r["team"] is None else str(r["team"]),
            action=action,
            workload=_holder(r),
            detail=str(r["reason"] or ""),
            monthly_savings=float(r["monthly_saving"] or 0.0),
        ))
    return sorted(out, key=lambda x: (-x.monthly_savings, x.team or "", x.workload))


def for_team(rows: list[Any], team: str | None) -> list[Any]:
    """The team's rows (all of them for the fleet statement), order kept."""
    return [r for r in rows if team is None or r.team == team]
