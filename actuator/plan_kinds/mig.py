"""The `mig` plan kind in the registry (`actuator.plan_kinds`): `mig_rollout` applies and rolls
back; this module says how its progress record reads as steps, problems and a retry, and what
`plans export` writes for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuledger.actuator.plan_kinds import ROLLOUTS, RollbackOutcome, StepOutcome
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import MigProgress, Progress

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import Obj, ObjectRef
    from gpuledger.core.config import Settings
    from gpuledger.optimizer.plan.contract import Plan


class MigRollout:
    """Node by node through MIG Manager (see `actuator.mig_rollout`)."""

    kind = "mig"
    progress = MigProgress

    def apply(self, ctx: RolloutContext) -> None:
        from gpuledger.actuator.mig_rollout import apply_mig

        apply_mig(ctx)

    def rollback(self, ctx: RolloutContext, applied: Progress) -> RollbackOutcome:
        from gpuledger.actuator.mig_rollout import rollback_mig

        if not isinstance(applied.apply, MigProgress):
            return RollbackOutcome()
        nodes = rollback_mig(ctx, applied.apply)
        return RollbackOutcome(
            steps=tuple(StepOutcome(f"Node/{n.node}", n.phase, n.detail) for n in nodes),
            problems=tuple(f"Node/{n.node} {n.phase}: {n.detail}" for n in nodes if n.phase != "done"),
        )

    def steps(self, progress: Progress) -> tuple[StepOutcome, ...]:
        prog = progress.apply
        if not isinstance(prog, MigProgress):
            return ()
        return tuple(StepOutcome(f"Node/{n.node}", n.phase, n.detail) for n in prog.nodes)

    def problems(self, progress: Progress) -> list[str]:
        prog = progress.apply
        if not isinstance(prog, MigProgress):
            return ["nothing was applied"]
        out = [f"Node/{n.node} {n.phase}: {n.detail}" for n in prog.nodes if n.phase in ("failed", "blocked")]
        out += [f"Node/{n.node} not reached" for n in prog.nodes if n.phase == "pending" and prog.stopped]
        return out

    def retry_failed(self, progress: Progress) -> None:
        """Applying a failed plan again retries its failed and blocked nodes (from their before-state)."""
        prog = progress.apply
        if not isinstance(prog, MigProgress):
            return
        prog.stopped = None
        for node in prog.nodes:
            if node.phase in ("failed", "blocked"):
                node.phase, node.detail, node.labeled_at = "pending", None, None

    def manifests(self, plan: Plan, settings: Settings) -> list[tuple[ObjectRef, Obj]]:
        """The mig-parted ConfigMap with the plan's entries (entries the plan does not use are
        not in the plan, so not written), then each node's `nvidia.com/mig.config` label."""
        from gpuledger.actuator.gateway import configmap_ref, node_ref
        from gpuledger.actuator.migconfig import CONFIG_KEY, MIG_CONFIG_LABEL, dump_document
        from gpuledger.optimizer.plan.contract import MigChanges

        changes = plan.changes
        assert isinstance(changes, MigChanges)
        k = settings.kubernetes
        docs: list[tuple[ObjectRef, Obj]] = []
        if changes.nodes:
            ref = configmap_ref(k.mig_configmap_namespace, k.mig_configmap_name)
            docs.append((ref, {"data": {CONFIG_KEY: dump_document(changes.mig_parted_config())}}))
        for node in sorted(changes.nodes, key=lambda n: n.node):
            docs.append((node_ref(node.node), {"metadata": {"labels": {MIG_CONFIG_LABEL: node.mig_config}}}))
        return docs


ROLLOUT = ROLLOUTS.register("mig", MigRollout())
