"""The single steps of changing one node's MIG layout: cordon, evict, label, and their undo.

Why apart from `mig_rollout`: the rollout is the order and the bookkeeping (which node, which
phase, when to stop); these are the guarded cluster writes it is made of. Each is idempotent
against the cluster (nothing is written when the object already has the wanted value) and
audits what it changed through the rollout context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuledger.actuator.dra_plane import refuse_dra_node
from gpuledger.actuator.gateway import EvictionBlockedError, Obj, node_ref, pod_ref
from gpuledger.actuator.mig_pdb import blocking_budgets
from gpuledger.actuator.migconfig import MIG_CONFIG_LABEL, MIG_RESOURCE_PREFIX, MIG_STATE_LABEL, labels
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import NodeProgress
from gpuledger.core.errors import ConflictingPlanError, NotFoundError


@dataclass(frozen=True)
class PodToEvict:
    """A pod the plan names on a node, and whether the plan allows evicting it."""

    namespace: str
    pod: str
    evictable: bool = True


@dataclass(frozen=True)
class NodeTarget:
    """What one node should become: its label value, the entry it selects and the pods in the way."""

    node: str
    target: str | None
    entry: list[dict[str, Any]] | None
    pods: tuple[PodToEvict, ...] = ()
    evict_all_gpu_pods: bool = False
    allowed_current: frozenset[str | None] = field(default_factory=frozenset)
    """Label values the node may carry when we set ours (anything else: someone else moved it)."""


def cordon(ctx: RolloutContext, node: str) -> None:
    """Mark the node unschedulable so nothing new lands on GPUs about to be reconfigured."""

    def mutate(obj: Obj) -> Obj | None:
        return None if (obj.get("spec") or {}).get("unschedulable") else {"spec": {"unschedulable": True}}

    _, _, changed = ctx.gateway.update(node_ref(node), mutate)
    if changed:
        ctx.record("node.cordon", f"Node/{node}", before={"unschedulable": False},
                   after={"unschedulable": True})


def uncordon(ctx: RolloutContext, record: NodeProgress) -> None:
    """Make the node schedulable again, unless it was already cordoned before we came."""
    if record.before_unschedulable:
        return

    def mutate(obj: Obj) -> Obj | None:
        return {"spec": {"unschedulable": None}} if (obj.get("spec") or {}).get("unschedulable") else None

    _, _, changed = ctx.gateway.update(node_ref(record.node), mutate)
    if changed:
        ctx.record("node.uncordon", f"Node/{record.node}", before={"unschedulable": True},
                   after={"unschedulable": False})


def evict(ctx: RolloutContext, target: NodeTarget) -> str | None:
    """Evict the pods in the way and wait for them to go; the reason when the node must be skipped.

    Before the first eviction the budgets covering the node's pods are read
    (`actuator.mig_pdb`): a budget that will refuse skips the node with its name and rule, the
    same in a dry run (the preview) as for real."""
    pods = list(target.pods)
    if target.evict_all_gpu_pods:
        pods += [PodToEvict(p["metadata"]["namespace"], p["metadata"]["name"])
                 for p in ctx.gateway.pods_on_node(target.node) if uses_gpu(p)]
    present: list[tuple[PodToEvict, Obj]] = []
    for pod in pods:
        try:
            live = ctx.gateway.get(pod_ref(pod.namespace, pod.pod))
        except NotFoundError:
            continue
        if (live.get("spec") or {}).get("nodeName") != target.node:
            continue
        if not pod.evictable:
            return f"{pod_ref(pod.namespace, pod.pod)} is marked not evictable by the plan"
        present.append((pod, live))
    budgets = blocking_budgets(ctx.gateway, [live for _, live in present])
    if budgets:
        return "; ".join(budgets)
    waiting: list[tuple[str, str, str]] = []
    for pod, live in present:
        ref = pod_ref(pod.namespace, pod.pod)
        try:
            ctx.gateway.evict(pod.namespace, pod.pod)
        except EvictionBlockedError as exc:
            ctx.record("pod.evict", str(ref), result="blocked", detail=str(exc))
            return str(exc)
        uid = str(live["metadata"].get("uid", ""))
        ctx.record("pod.evict", str(ref), before={"node": target.node, "uid": uid})
        waiting.append((pod.namespace, pod.pod, uid))
    if ctx.dry_run:
        return None
    deadline = ctx.clock() + ctx.state_timeout
    while waiting:
        waiting = [w for w in waiting if still_there(ctx, *w)]
        if not waiting:
            break
        if ctx.clock() >= deadline:
            names = ", ".join(f"Pod/{ns}/{name}" for ns, name, _ in waiting)
            return f"evicted pods did not terminate within {ctx.state_timeout}: {names}"
        ctx.sleep(ctx.poll_s)
    return None


def still_there(ctx: RolloutContext, namespace: str, pod: str, uid: str) -> bool:
    """Whether the evicted pod (this uid: a re-created namesake does not count) still exists."""
    try:
        live = ctx.gateway.get(pod_ref(namespace, pod))
    except NotFoundError:
        return False
    return str(live["metadata"].get("uid", "")) == uid


def uses_gpu(pod: Mapping[str, Any]) -> bool:
    """Whether a container requests or limits a whole GPU or a MIG device (rollback evicts those)."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            for name in resources.get(section) or {}:
                if name == "nvidia.com/gpu" or name.startswith(MIG_RESOURCE_PREFIX):
                    return True
    return False


def set_label(ctx: RolloutContext, target: NodeTarget, record: NodeProgress) -> None:
    """Select the target mig-parted entry; refuse (re-plan) when someone else moved the label,
    and on a DRA-plane node always (`actuator.dra_plane`)."""
    refuse_dra_node(ctx.gateway, target.node)

    def mutate(obj: Obj) -> Obj | None:
        current = labels(obj).get(MIG_CONFIG_LABEL)
        if current == target.target:
            return None
        allowed = target.allowed_current | {record.before_mig_config}
        if current not in allowed:
            raise ConflictingPlanError(
                f"Node/{target.node}: label {MIG_CONFIG_LABEL} is {current!r}, expected "
                f"{record.before_mig_config!r}; someone else changed it, re-plan"
            )
        return {"metadata": {"labels": {MIG_CONFIG_LABEL: target.target, MIG_STATE_LABEL: None}}}

    _, _, changed = ctx.gateway.update(node_ref(target.node), mutate)
    if changed:
        ctx.record("node.label", f"Node/{target.node}", before={MIG_CONFIG_LABEL: record.before_mig_config},
                   after={MIG_CONFIG_LABEL: target.target})


def restore_label(ctx: RolloutContext, target: NodeTarget, record: NodeProgress) -> None:
    """Put the before-label back, unless it is back already or someone else owns the label now."""

    def mutate(obj: Obj) -> Obj | None:
        current = labels(obj).get(MIG_CONFIG_LABEL)
        if current == record.before_mig_config or current != target.target:
            return None  # already back, or someone else owns it now
        return {"metadata": {"labels": {MIG_CONFIG_LABEL: record.before_mig_config}}}

    _, _, changed = ctx.gateway.update(node_ref(target.node), mutate)
    if changed:
        ctx.record("node.label.restore", f"Node/{target.node}", before={MIG_CONFIG_LABEL: target.target},
                   after={MIG_CONFIG_LABEL: record.before_mig_config})
