"""The `mig` plan kind, optimizer side: a node's whole mig-parted entry per changed node
(`contract.MigChanges`), shown as each GPU's layout before → after with the pods to evict."""

from __future__ import annotations

from typing import Any

from gpuledger.optimizer.plan.contract import PLAN_KINDS, MigChanges, Plan, PlanKind
from gpuledger.optimizer.plan.render import fold, table


def render_changes(changes: Any) -> str:
    """Per changed GPU: node, its mig.config label, layout before → after, and how many pods it
    evicts (how many serving); then every pod to evict, per GPU, folded below the table (one
    cell of every pod name ran to thousands of characters, issue 32)."""
    assert isinstance(changes, MigChanges)
    if not changes.nodes:
        return "no MIG changes: the current layouts are already optimal"
    rows: list[tuple[Any, ...]] = []
    named: list[str] = []
    for node in changes.nodes:
        evict: dict[int, list[str]] = {}
        serving: dict[int, int] = {}
        for pod in node.pods_to_evict:
            mark = " (serving)" if pod.serving else ""
            evict.setdefault(pod.gpu_index, []).append(f"{pod.namespace}/{pod.pod}{mark}")
            serving[pod.gpu_index] = serving.get(pod.gpu_index, 0) + int(pod.serving)
        for change in node.gpus_changed:
            pods = evict.get(change.index, [])
            rows.append((node.node, node.mig_config, change.index, change.before.label(),
                         change.after.label(), _count(len(pods), serving.get(change.index, 0))))
            if pods:
                named.append(fold(f"{node.node} gpu {change.index}: {', '.join(pods)}"))
    text = table(rows, ("node", "nvidia.com/mig.config", "gpu", "before", "after", "pods to evict"))
    return text + ("\n\npods to evict:\n" + "\n".join(named) if named else "")


def _count(pods: int, serving: int) -> str:
    if not pods:
        return "-"
    return f"{pods} pod{'s' if pods > 1 else ''}" + (f", {serving} serving" if serving else "")


def summary(plan: Plan) -> str:
    changes, e = plan.changes, plan.effect
    assert isinstance(changes, MigChanges)
    return f"{len(changes.nodes)} nodes, {e.gpus_changed or 0} GPUs changed, {e.gpus_freed or 0} freed"


KIND = PLAN_KINDS.register("mig", PlanKind(MigChanges, render=render_changes, summary=summary))
