"""The `mig` plan kind, optimizer side: a node's whole mig-parted entry per changed node
(`contract.MigChanges`), shown as each GPU's layout before → after with the pods to evict."""

from __future__ import annotations

from typing import Any

from gpuledger.optimizer.plan.contract import PLAN_KINDS, MigChanges, Plan, PlanKind
from gpuledger.optimizer.plan.render import table


def render_changes(changes: Any) -> str:
    """Per changed GPU: node, its mig.config label, layout before → after, pods to evict."""
    assert isinstance(changes, MigChanges)
    if not changes.nodes:
        return "no MIG changes: the current layouts are already optimal"
    rows: list[tuple[Any, ...]] = []
    for node in changes.nodes:
        evict: dict[int, list[str]] = {}
        for pod in node.pods_to_evict:
            mark = " (serving)" if pod.serving else ""
            evict.setdefault(pod.gpu_index, []).append(f"{pod.namespace}/{pod.pod}{mark}")
        for change in node.gpus_changed:
            rows.append((
                node.node, node.mig_config, change.index, change.before.label(), change.after.label(),
                ", ".join(evict.get(change.index, [])) or "-",
            ))
    return table(rows, ("node", "nvidia.com/mig.config", "gpu", "before", "after", "pods to evict"))


def summary(plan: Plan) -> str:
    changes, e = plan.changes, plan.effect
    assert isinstance(changes, MigChanges)
    return f"{len(changes.nodes)} nodes, {e.gpus_changed or 0} GPUs changed, {e.gpus_freed or 0} freed"


KIND = PLAN_KINDS.register("mig", PlanKind(MigChanges, render=render_changes, summary=summary))
