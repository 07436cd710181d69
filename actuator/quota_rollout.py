"""Roll a quota plan out to a queue system's quota objects without ever over-committing a cohort.

The queue system's part (where its objects live, how the planned numbers are found and set) is
its `QuotaWriter` (`actuator.queues`, Kueue's ClusterQueues today, chosen by the kind the plan
observed). For Kueue, `spec.resourceGroups` is an atomic list: a write replaces all of it, so
each write reads the ClusterQueue, changes only the planned numbers and sends the whole list
back with the resourceVersion it read.

Steps of `apply_quota`:
1. Group the plan's changes by ClusterQueue and split each queue's changes into decreases
   (nominal quota goes down) and the rest.
2. Preflight: for every queue, check each planned number still holds (it is the plan's old
   value, or already its new one) and send the final list as a dry run, so a validation error
   (CRD schema, CEL rules) stops the plan before anything is written.
3. Write all decreases first, then everything else. The sum of nominal quotas per (cohort,
   flavor, resource) therefore only falls, then only rises: it never passes the larger of its
   old and new values, so it never exceeds capacity when both plans fit.
4. Each write goes through `ClusterGateway.update`: on 409 it re-reads and writes again only if
   the plan still holds; otherwise the plan is refused as conflicting.
5. The before-list of each queue and every finished step are saved in the progress record.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from gpuledger.actuator.queues import QuotaWriter, writer_for
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import QuotaProgress, QuotaStep

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import QuotaChange


# 1. Entry points ----------------------------------------------------------------------------------
def apply_quota(ctx: RolloutContext) -> QuotaProgress:
    from gpuledger.optimizer.plan.contract import QuotaChanges

    changes = ctx.plan.changes
    assert isinstance(changes, QuotaChanges)
    planned = [c for c in changes.quotas if c.changed]
    prog = ctx.progress.apply
    if not isinstance(prog, QuotaProgress):
        prog = QuotaProgress(steps=plan_steps(planned))
        ctx.progress.apply = prog
    _preflight(ctx, planned)
    if ctx.dry_run:
        return prog
    ctx.checkpoint()
    _run_steps(ctx, prog, planned)
    return prog


def rollback_quota(ctx: RolloutContext) -> QuotaProgress:
    """Write each planned number back to its old value, through the same ordered, guarded path."""
    from gpuledger.optimizer.plan.contract import QuotaChanges

    changes = ctx.plan.changes
    assert isinstance(changes, QuotaChanges)
    inverse = [invert(c) for c in changes.quotas if c.changed]
    prog = QuotaProgress(steps=plan_steps(inverse))
    _preflight(ctx, inverse)
    _run_steps(ctx, prog, inverse)
    return prog


def invert(change: QuotaChange) -> QuotaChange:
    return change.model_copy(update={
        "old_nominal": change.new_nominal, "new_nominal": change.old_nominal,
        "old_borrowing_limit": change.new_borrowing_limit, "new_borrowing_limit": change.old_borrowing_limit,
        "old_lending_limit": change.new_lending_limit, "new_lending_limit": change.old_lending_limit,
    })


def is_decrease(change: QuotaChange) -> bool:
    return change.new_nominal < change.old_nominal


def plan_steps(changes: Sequence[QuotaChange]) -> list[QuotaStep]:
    """Step 1: one write per queue with decreases, then one per queue with other changes."""
    decreasing = dict.fromkeys(c.cluster_queue for c in changes if is_decrease(c))
    increasing = dict.fromkeys(c.cluster_queue for c in changes if not is_decrease(c))
    return [QuotaStep(cluster_queue=q, phase="decrease") for q in decreasing] + [
        QuotaStep(cluster_queue=q, phase="increase") for q in increasing]


# 2. Preflight and steps ---------------------------------------------------------------------------
def _preflight(ctx: RolloutContext, changes: Sequence[QuotaChange]) -> None:
    """Step 2: every queue's final list, as a dry run (in dry-run mode this is all there is)."""
    writer = writer_for(ctx.plan)
    with ctx.gateway.dry_run_only():
        for queue in dict.fromkeys(c.cluster_queue for c in changes):
            mine = [c for c in changes if c.cluster_queue == queue]
            ctx.gateway.update(writer.ref(queue), partial(writer.mutation, changes=mine))


def _run_steps(ctx: RolloutContext, prog: QuotaProgress, changes: Sequence[QuotaChange]) -> None:
    """Steps 3–5."""
    writer: QuotaWriter = writer_for(ctx.plan)
    field = writer.body_field
    for step in prog.steps:
        if step.done:
            continue
        mine = [c for c in changes if c.cluster_queue == step.cluster_queue
                and is_decrease(c) == (step.phase == "decrease")]
        ref = writer.ref(step.cluster_queue)
        if step.cluster_queue not in prog.before:
            prog.before[step.cluster_queue] = writer.body(ctx.gateway.get(ref))
            ctx.checkpoint()
        before, after, changed = ctx.gateway.update(ref, partial(writer.mutation, changes=mine))
        ctx.record(
            f"{writer.object_kind.lower()}.{step.phase}", str(ref), before={field: writer.body(before)},
            after={field: writer.body(after)},
            detail=None if changed else "already at the planned values",
        )
        step.done = True
        ctx.checkpoint()
