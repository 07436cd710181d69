"""The `quota` plan kind, optimizer side: each (queue, flavor, resource) quota old → new and
each queue's whole new quota body (`contract.QuotaChanges`), shown as the changed quotas."""

from __future__ import annotations

from typing import Any

from gpuledger.optimizer.plan.contract import PLAN_KINDS, Plan, PlanKind, QuotaChanges
from gpuledger.optimizer.plan.render import cell, table


def render_changes(changes: Any) -> str:
    """One row per changed quota: nominal, borrowing and lending limits, old → new."""
    assert isinstance(changes, QuotaChanges)
    rows = [
        (
            q.cluster_queue, q.cohort or "-", q.flavor, q.resource,
            f"{cell(q.old_nominal)} → {cell(q.new_nominal)}",
            f"{cell(q.old_borrowing_limit)} → {cell(q.new_borrowing_limit)}",
            f"{cell(q.old_lending_limit)} → {cell(q.new_lending_limit)}",
        )
        for q in changes.quotas if q.changed
    ]
    if not rows:
        return "no quota changes: the current quotas are already optimal"
    return table(rows, ("cluster queue", "cohort", "flavor", "resource", "nominal", "borrowing", "lending"))


def summary(plan: Plan) -> str:
    changes = plan.changes
    assert isinstance(changes, QuotaChanges)
    changed = sum(q.changed for q in changes.quotas)
    text = f"{changed} quotas changed in {len(changes.cluster_queues)} cluster queues"
    e = plan.evaluation
    if e is not None and e.origins:
        cut = e.reduction
        text += (f"; held out: pending GPU-hours {e.pending_before / 60:,.1f} → {e.pending_after / 60:,.1f}"
                 + (f" ({-cut:+.1%})" if cut is not None else ""))
    return text


KIND = PLAN_KINDS.register("quota", PlanKind(QuotaChanges, render=render_changes, summary=summary))
