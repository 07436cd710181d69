"""Roll a MIG plan out node by node, the way an admin would by hand, but resumable and audited.

Steps of `apply_mig`:
1. ConfigMap: record the plan's mig-parted entries as they were (for rollback), then write the
   new entries into MIG Manager's ConfigMap, keeping every other entry intact.
2. Nodes, in plan order, `settings.plans.nodes_in_parallel` at a time. For each node:
   a. record its before-state (mig.config label, whether it was already cordoned);
   b. cordon it so nothing new lands on the GPUs about to change;
   c. evict the plan's pods through the Eviction API (PodDisruptionBudgets apply) and wait for
      them to go; a refused or stuck eviction uncordons the node untouched (`blocked`) and the
      rollout goes on with the next node;
   d. set `nvidia.com/mig.config` (and drop the old `mig.config.state`, so a `success` left from
      the previous configuration cannot be mistaken for the new one);
   e. wait for MIG Manager: `success` and the node's `nvidia.com/mig-*` allocatable equal to the
      plan → uncordon (`done`); `pending` or `rebooting` (the host restarts for the change:
      the node stays cordoned) → keep waiting; `failed`, still in progress after
      `state_timeout_s`, or a different allocatable → restore the old label, uncordon, mark
      the node `failed` and stop.
3. Every step is saved to the progress record before the next one starts, and each is
   idempotent, so `apply` after a crash continues where the record says.

`rollback_mig` runs the same per-node machine towards each node's recorded before-label, then
restores the ConfigMap entries the plan had changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from gpuledger.actuator.gateway import Obj, configmap_ref
from gpuledger.actuator.mig_node_ops import (
    NodeTarget,
    PodToEvict,
    cordon,
    evict,
    restore_label,
    set_label,
    uncordon,
)
from gpuledger.actuator.migconfig import (
    MIG_CONFIG_LABEL,
    MIG_STATE_FAILED,
    MIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    config_key,
    dump_document,
    expected_mig_resources,
    gpu_count,
    labels,
    mig_allocatable,
    read_document,
    with_entries,
)
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import FINAL_PHASES, MigProgress, NodeProgress
from gpuledger.core.errors import ClusterError, ConflictingPlanError, GpuledgerError, NotFoundError, PlanError


# 1. Entry points ----------------------------------------------------------------------------------
def apply_mig(ctx: RolloutContext) -> MigProgress:
    from gpuledger.optimizer.plan.contract import MigChanges

    changes = ctx.plan.changes
    assert isinstance(changes, MigChanges)
    prog = ctx.progress.apply
    if not isinstance(prog, MigProgress):
        prog = MigProgress(nodes=[NodeProgress(node=n.node) for n in changes.nodes])
        ctx.progress.apply = prog
        ctx.checkpoint()
    if not prog.configmap.written:
        _write_entries(ctx, prog, {n.mig_config: n.mig_parted_entry() for n in changes.nodes})
    targets = [
        NodeTarget(
            node=n.node, target=n.mig_config, entry=n.mig_parted_entry(),
            pods=tuple(PodToEvict(p.namespace, p.pod, p.evictable) for p in n.pods_to_evict),
            allowed_current=frozenset({prog.node(n.node).before_mig_config, n.previous_mig_config}),
        )
        for n in changes.nodes
    ]
    _roll(ctx, prog, targets, prog.nodes)
    return prog


def rollback_mig(ctx: RolloutContext, applied: MigProgress) -> list[NodeProgress]:
    """Return every node the plan changed to its recorded label, then restore the ConfigMap."""
    from gpuledger.optimizer.plan.contract import MigChanges

    changes = ctx.plan.changes
    assert isinstance(changes, MigChanges)
    document = _read_configmap(ctx)[1]
    configs = document.get("mig-configs") or {}
    before_entries = applied.configmap.before or {}
    targets, progress = [], []
    for change in changes.nodes:
        record = applied.node(change.node)
        if record.phase in ("pending", "blocked", "failed"):
            continue  # never changed, or already restored by the failure path
        back = record.before_mig_config
        entry = before_entries.get(back) if back in before_entries else configs.get(back) if back else None
        targets.append(NodeTarget(
            node=change.node, target=back, entry=entry, evict_all_gpu_pods=True,
            allowed_current=frozenset({change.mig_config, back}),
        ))
        progress.append(NodeProgress(node=change.node))
    holder = MigProgress(nodes=progress)
    _roll(ctx, holder, targets, holder.nodes)
    failed = [n for n in holder.nodes if n.phase != "done"]
    if not failed and before_entries:
        _restore_entries(ctx, before_entries)
    return holder.nodes


# 2. The ConfigMap ---------------------------------------------------------------------------------
def _read_configmap(ctx: RolloutContext) -> tuple[Obj, dict[str, Any]]:
    k8s = ctx.settings.kubernetes
    ref = configmap_ref(k8s.mig_configmap_namespace, k8s.mig_configmap_name)
    try:
        configmap = ctx.gateway.get(ref)
    except NotFoundError:
        raise PlanError(
            f"{ref}: MIG Manager's ConfigMap does not exist (settings kubernetes.mig_configmap_namespace/"
            "mig_configmap_name); is the GPU Operator installed with MIG Manager?"
        ) from None
    return configmap, read_document(configmap, str(ref))


def _write_entries(ctx: RolloutContext, prog: MigProgress, entries: Mapping[str, Any]) -> None:
    k8s = ctx.settings.kubernetes
    ref = configmap_ref(k8s.mig_configmap_namespace, k8s.mig_configmap_name)
    if prog.configmap.before is None:
        current = read_document(_read_configmap(ctx)[0], str(ref))["mig-configs"]
        prog.configmap.before = {name: current.get(name) for name in entries}
        ctx.checkpoint()

    def mutate(configmap: Obj) -> Obj | None:
        doc = read_document(configmap, str(ref))
        new = with_entries(doc, entries)
        return None if new == doc else {"data": {config_key(configmap): dump_document(new)}}

    _, _, changed = ctx.gateway.update(ref, mutate)
    ctx.record("configmap.write", str(ref), before=prog.configmap.before, after=dict(entries),
               detail=None if changed else "entries already present")
    prog.configmap.written = True
    ctx.checkpoint()


def _restore_entries(ctx: RolloutContext, before: Mapping[str, Any]) -> None:
    """Put back the entries the plan overwrote; keep any still selected by some node's label."""
    k8s = ctx.settings.kubernetes
    ref = configmap_ref(k8s.mig_configmap_namespace, k8s.mig_configmap_name)
    in_use = {
        labels(n).get(MIG_CONFIG_LABEL)
        for n in ctx.gateway.list_objects("/api/v1/nodes", what="list nodes", label_selector=MIG_CONFIG_LABEL)
    }
    restore = {name: entry for name, entry in before.items() if name not in in_use}
    if not restore:
        return

    def mutate(configmap: Obj) -> Obj | None:
        doc = read_document(configmap, str(ref))
        new = with_entries(doc, restore)
        return None if new == doc else {"data": {config_key(configmap): dump_document(new)}}

    ctx.gateway.update(ref, mutate)
    ctx.record("configmap.restore", str(ref), after=restore)


# 3. The per-node machine --------------------------------------------------------------------------
def _roll(
    ctx: RolloutContext, prog: MigProgress, targets: Sequence[NodeTarget], records: Sequence[NodeProgress],
) -> None:
    by_name = {r.node: r for r in records}
    todo = [t for t in targets if by_name[t.node].phase not in FINAL_PHASES]
    size = ctx.settings.plans.nodes_in_parallel
    for first in range(0, len(todo), size):
        batch = [(t, by_name[t.node]) for t in todo[first:first + size]]
        for target, record in batch:
            _guarded(ctx, target, record, _prepare)
        if not ctx.dry_run:
            _wait(ctx, [(t, r) for t, r in batch if r.phase == "labeled"])
        failed = [r for _, r in batch if r.phase == "failed"]
        if failed:
            prog.stopped = f"rollout stopped: node {failed[0].node} failed ({failed[0].detail})"
            ctx.checkpoint()
            return


NodeStep = Callable[[RolloutContext, NodeTarget, NodeProgress], None]


def _guarded(ctx: RolloutContext, target: NodeTarget, record: NodeProgress, step: NodeStep) -> None:
    """Run a node step; any cluster or plan error fails this node (label restored, uncordoned)."""
    try:
        step(ctx, target, record)
    except (ClusterError, ConflictingPlanError, PlanError) as exc:
        _fail(ctx, target, record, str(exc))


def _prepare(ctx: RolloutContext, target: NodeTarget, record: NodeProgress) -> None:
    """Steps a–d for one node, each skipped when the record says it is done."""
    if record.phase == "pending":
        node = ctx.gateway.get_node(target.node)
        record.before_mig_config = labels(node).get(MIG_CONFIG_LABEL)
        record.before_unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        record.phase = "started"
        ctx.checkpoint()
    if record.phase == "started":
        cordon(ctx, target.node)
        record.phase = "cordoned"
        ctx.checkpoint()
    if record.phase == "cordoned":
        blocked = evict(ctx, target)
        if blocked:
            uncordon(ctx, record)
            record.phase, record.detail = "blocked", blocked
            ctx.record("node.blocked", f"Node/{target.node}", result="blocked", detail=blocked)
            ctx.checkpoint()
            return
        record.phase = "evicted"
        ctx.checkpoint()
    if record.phase == "evicted":
        set_label(ctx, target, record)
        record.phase, record.labeled_at = "labeled", ctx.clock()
        ctx.checkpoint()


# 4. Waiting for MIG Manager ------------------------------------------------------------------------
def _wait(ctx: RolloutContext, batch: list[tuple[NodeTarget, NodeProgress]]) -> None:
    """Poll the labeled nodes until each succeeded (verified) or failed or timed out."""
    waiting = list(batch)
    while waiting:
        still: list[tuple[NodeTarget, NodeProgress]] = []
        for target, record in waiting:
            try:
                verdict = _check(ctx, target, record)
            except (ClusterError, PlanError) as exc:
                verdict = str(exc)
            if verdict == "done":
                _finish(ctx, target, record)
            elif verdict is None:
                still.append((target, record))
            else:
                _fail(ctx, target, record, verdict)
        waiting = still
        if waiting:
            ctx.sleep(ctx.poll_s)


def _check(ctx: RolloutContext, target: NodeTarget, record: NodeProgress) -> str | None:
    """'done', None (keep waiting) or the reason the node failed."""
    node = ctx.gateway.get_node(target.node)
    node_labels = labels(node)
    current = node_labels.get(MIG_CONFIG_LABEL)
    if current != target.target:
        return f"label {MIG_CONFIG_LABEL} changed to {current!r} by someone else while waiting"
    if target.target is None:
        return "done"  # no configuration selected: MIG Manager has nothing to do
    state = node_labels.get(MIG_STATE_LABEL)
    overdue = ctx.clock() >= _deadline(ctx, record)
    if state == MIG_STATE_FAILED:
        return f"MIG Manager reported {MIG_STATE_LABEL}=failed for {target.target!r}"
    if state == MIG_STATE_SUCCESS:
        if target.entry is None:
            return "done"
        expected = expected_mig_resources(target.entry, gpu_count(node))
        actual = mig_allocatable(node)
        if actual == expected:
            return "done"
        if overdue:
            return f"MIG Manager reported success but allocatable {actual} differs from the plan's {expected}"
        return None
    # In progress: `pending` or `rebooting` (`MIG_STATES_IN_PROGRESS`: the host restarts for the
    # change and comes back to `success`), or no state yet (MIG Manager has not seen the label).
    if overdue:
        return f"{MIG_STATE_LABEL} still {state or 'unset'!r} after {ctx.state_timeout} (timeout)"
    return None


def _deadline(ctx: RolloutContext, record: NodeProgress) -> datetime:
    start = record.labeled_at or ctx.clock()
    return start + ctx.state_timeout


def _finish(ctx: RolloutContext, target: NodeTarget, record: NodeProgress) -> None:
    """The node has its new layout: uncordon it. A failing uncordon fails the node but keeps the
    (good) layout: restoring the label would reconfigure the GPUs again for nothing."""
    try:
        uncordon(ctx, record)
        allocatable = mig_allocatable(ctx.gateway.get_node(target.node))
    except GpuledgerError as exc:
        record.phase, record.detail = "failed", f"configured, but could not uncordon: {exc}"
        ctx.record("node.failed", f"Node/{target.node}", result="failed", detail=record.detail)
        ctx.checkpoint()
        return
    record.phase, record.detail = "done", None
    ctx.record("node.done", f"Node/{target.node}", after={"allocatable": allocatable})
    ctx.checkpoint()


def _fail(ctx: RolloutContext, target: NodeTarget, record: NodeProgress, reason: str) -> None:
    """Restore the old label (if we changed it), uncordon, mark the node failed."""
    detail = reason
    try:
        if record.phase in ("labeled", "evicted"):
            restore_label(ctx, target, record)
        if record.phase not in ("pending",):
            uncordon(ctx, record)
    except GpuledgerError as exc:
        detail = f"{reason}; restoring the node failed too: {exc}"
    record.phase, record.detail = "failed", detail
    ctx.record("node.failed", f"Node/{target.node}", result="failed", detail=detail)
    ctx.checkpoint()
