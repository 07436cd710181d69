"""The `quota` plan kind in the registry (`actuator.plan_kinds`): `quota_rollout` (Kueue
ClusterQueues, decreases first) applies and rolls back; this module reads its progress record
and says what `plans export` writes for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuledger.actuator.plan_kinds import ROLLOUTS, RollbackOutcome, StepOutcome
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import Progress, QuotaProgress

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import Obj, ObjectRef
    from gpuledger.core.config import Settings
    from gpuledger.optimizer.plan.contract import Plan


class QuotaRollout:
    """One guarded write per ClusterQueue and phase (see `actuator.quota_rollout`)."""

    kind = "quota"
    progress = QuotaProgress

    def apply(self, ctx: RolloutContext) -> None:
        from gpuledger.actuator.quota_rollout import apply_quota

        apply_quota(ctx)

    def rollback(self, ctx: RolloutContext, applied: Progress) -> RollbackOutcome:
        from gpuledger.actuator.quota_rollout import rollback_quota

        if not isinstance(applied.apply, QuotaProgress):
            return RollbackOutcome()
        quota = rollback_quota(ctx)
        return RollbackOutcome(
            steps=tuple(
                StepOutcome(f"ClusterQueue/{s.cluster_queue}", f"{s.phase}:done") for s in quota.steps
            ),
        )

    def steps(self, progress: Progress) -> tuple[StepOutcome, ...]:
        prog = progress.apply
        if not isinstance(prog, QuotaProgress):
            return ()
        return tuple(
            StepOutcome(f"ClusterQueue/{s.cluster_queue}", f"{s.phase}:{'done' if s.done else 'todo'}")
            for s in prog.steps
        )

    def problems(self, progress: Progress) -> list[str]:
        prog = progress.apply
        if not isinstance(prog, QuotaProgress):
            return ["nothing was applied"]
        return [f"ClusterQueue/{s.cluster_queue} {s.phase} not written" for s in prog.steps if not s.done]

    def retry_failed(self, progress: Progress) -> None:
        """Nothing to reset: each ClusterQueue step is redone only when it is not marked done."""

    def manifests(self, plan: Plan, settings: Settings) -> list[tuple[ObjectRef, Obj]]:
        """Each changed queue's quota body with the planned numbers, by the mutation of the
        writer of the plan's queue system (`actuator.queues.writer_for`)."""
        from gpuledger.actuator.queues import writer_for
        from gpuledger.optimizer.plan.contract import QuotaChanges

        changes = plan.changes
        assert isinstance(changes, QuotaChanges)
        writer = writer_for(plan)
        docs: list[tuple[ObjectRef, Obj]] = []
        for update in sorted(changes.cluster_queues, key=lambda u: u.name):
            planned = [c for c in changes.quotas if c.cluster_queue == update.name and c.changed]
            if not planned:
                continue
            docs.append((writer.ref(update.name),
                         {"spec": writer.manifest_spec(update.resource_groups, planned)}))
        return docs


ROLLOUT = ROLLOUTS.register("quota", QuotaRollout())
