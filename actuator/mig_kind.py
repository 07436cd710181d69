"""The `mig` plan kind in the registry (`actuator.plan_kinds`): `mig_rollout` applies and rolls
back; this module says how its progress record reads as steps, problems and a retry."""

from __future__ import annotations

from gpuledger.actuator.plan_kinds import RollbackOutcome, StepOutcome
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import MigProgress, Progress


class MigRollout:
    """Node by node through MIG Manager (see `actuator.mig_rollout`)."""

    kind = "mig"

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


ROLLOUT = MigRollout()
