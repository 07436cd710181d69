"""The plan workflow: approve, reject, expire, apply (or dry-run) and roll back.

These plain functions are what both the CLI (`gpuledger plans …`) and the dashboard's buttons
call, so the rules are enforced on the server side in one place: the approval policy
(`actuator.approval`: admin role, expiry, staleness, preview before apply) decides, the
compare-and-set store (`optimizer.plan.store`) moves the status with its audit row, and the
plan kind's registered rollout (`actuator.plan_kinds`) does the cluster work.

- only an approved plan is applied; before its first write the cluster is re-read and compared
  with the plan's fingerprint, and a plan whose state moved is marked `stale` with nothing
  written (`ConflictingPlanError`), so the optimizer can re-plan;
- an interrupted apply (`applying`) or a failed one is resumed from its progress record; from
  then on each step checks its own object (the fingerprint cannot match any more: the plan's
  own writes changed the objects);
- every action lands in the audit log (status moves via the store, cluster writes via the
  rollouts, refusals via the policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuledger.actuator.approval import ApprovalPolicy, Clock
from gpuledger.actuator.audit import Auditor
from gpuledger.actuator.gateway import ClusterGateway, WriteRecord
from gpuledger.actuator.plan_kinds import StepOutcome, rollout_for
from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import Progress
from gpuledger.core.access import Principal
from gpuledger.core.config import Settings
from gpuledger.core.errors import GpuledgerError, PlanError

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.store import PlanRecord
    from gpuledger.warehouse.plans import PlanWarehouse

__all__ = ["ApplyResult", "StepOutcome", "apply", "approve", "connect", "expire", "reject", "rollback"]

RESUMABLE = frozenset({"applying", "failed"})
ROLLBACKABLE = frozenset({"applied", "applying", "failed"})


@dataclass(frozen=True)
class ApplyResult:
    """What an apply or rollback did, or in dry-run mode would do."""

    plan_id: str
    kind: str
    action: str
    status: str
    dry_run: bool
    writes: tuple[WriteRecord, ...] = ()
    steps: tuple[StepOutcome, ...] = ()
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("applied", "rolled_back") or (
            self.dry_run and self.status not in ("failed", "blocked"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id, "kind": self.kind, "action": self.action, "status": self.status,
            "dry_run": self.dry_run, "message": self.message,
            "writes": [{"object": w.object, "verb": w.verb, "patch": w.patch, "dry_run": w.dry_run}
                       for w in self.writes],
            "steps": [{"object": s.object, "state": s.state, "detail": s.detail} for s in self.steps],
        }


# 1. Approval ---------------------------------------------------------------------------------------
def approve(
    wh: PlanWarehouse, plan_id: str, *, principal: Principal, settings: Settings, now: datetime | None = None,
) -> PlanRecord:
    """Approve a proposed plan (admin only; refuses an expired plan and marks it expired)."""
    from gpuledger.optimizer.plan.store import set_status

    policy = ApprovalPolicy.of(settings)
    policy.require_admin(wh, principal, plan_id=plan_id, action="approve", now=now)
    record = policy.load_fresh(wh, plan_id, actor=principal.actor, now=now)
    if record.status != "proposed":
        raise PlanError(f"plan {plan_id}: is {record.status}; only a proposed plan can be approved")
    return set_status(wh, plan_id, "approved", actor=principal.actor, detail="approved", now=now,
                      expected=record.status)


def reject(
    wh: PlanWarehouse, plan_id: str, *, principal: Principal, settings: Settings, reason: str,
    now: datetime | None = None,
) -> PlanRecord:
    """Reject a proposed or approved plan with a reason (admin only)."""
    from gpuledger.optimizer.plan.store import load_record, set_status

    ApprovalPolicy.of(settings).require_admin(wh, principal, plan_id=plan_id, action="reject", now=now)
    record = load_record(wh, plan_id)
    if record.status not in ("proposed", "approved"):
        raise PlanError(
            f"plan {plan_id}: is {record.status}; only a proposed or approved plan can be rejected"
        )
    return set_status(wh, plan_id, "rejected", actor=principal.actor, detail=reason or "rejected", now=now,
                      expected=record.status)


def expire(wh: PlanWarehouse, *, settings: Settings, now: datetime | None = None) -> list[str]:
    """Mark every proposed or approved plan older than the configured age as expired."""
    from gpuledger.optimizer.plan.store import expire_plans

    return expire_plans(wh, ApprovalPolicy.of(settings).expire_after, now=now)


# 2. Apply ------------------------------------------------------------------------------------------
def connect(settings: Settings, kubeconfig: str | None = None) -> ClusterGateway:
    """The gateway for `--kubeconfig`, else the configured kubeconfig, else in-cluster / ~/.kube."""
    k8s = settings.kubernetes
    return ClusterGateway.from_kubeconfig(kubeconfig or k8s.kubeconfig, k8s.context)


def apply(
    wh: PlanWarehouse, plan_id: str, *, principal: Principal, settings: Settings, cluster: ClusterGateway,
    dry_run: bool = False, now: datetime | None = None,
) -> ApplyResult:
    """Apply an approved plan (or resume an interrupted one); `dry_run` sends every write with
    dryRun=All only and changes nothing, neither in the cluster nor in the plan's status (it
    records the preview a real apply needs).

    Steps:
    1. The policy admits the action: admin, expiry, status, staleness, preview (`_admit`).
    2. Dry run: run the kind's rollout with every write dry, record the preview, stop.
    3. Move to `applying` (progress kept), run the kind's rollout, checkpointing each step.
    4. Move to `applied`, or `failed` with the reason (resumable by running apply again).
    """
    from gpuledger.optimizer.plan.store import set_status

    action = "dry-run" if dry_run else "apply"
    audit = Auditor(wh, principal.actor, plan_id, clock=Clock(now))
    record = _admit(wh, plan_id, principal=principal, settings=settings, cluster=cluster, audit=audit,
                    dry_run=dry_run, now=now)
    plan, kind = record.plan, rollout_for(record.plan.kind)
    progress = Progress.load(record.progress, kind.progress) if record.status in RESUMABLE else Progress()
    if record.status == "failed":
        kind.retry_failed(progress)

    def save(checkpoint: Progress) -> None:
        set_status(wh, plan_id, "applying", checkpoint.dump(), actor=principal.actor, detail="progress",
                   expected="applying")

    ctx = RolloutContext(plan=plan, gateway=cluster, audit=audit, settings=settings, progress=progress,
                         save=save, dry_run=dry_run)
    first_write = len(cluster.writes)
    if dry_run:
        with cluster.dry_run_only():
            kind.apply(ctx)
        writes = tuple(cluster.writes[first_write:])
        audit.record("apply.dry_run", f"plan/{plan_id}", after=[w.object for w in writes], result="dry-run")
        return _preview_result(plan_id, plan.kind, record.status, writes, kind.steps(progress))
    set_status(wh, plan_id, "applying", progress.dump(), actor=principal.actor,
               detail="resume" if record.status in RESUMABLE else "start", now=now, expected=record.status)
    try:
        kind.apply(ctx)
    except GpuledgerError as exc:
        set_status(wh, plan_id, "failed", progress.dump(), actor=principal.actor, detail=str(exc),
                   expected="applying")
        raise
    problems = kind.problems(progress)
    status = "failed" if problems else "applied"
    message = "; ".join(problems) if problems else "every change applied and verified"
    set_status(wh, plan_id, status, progress.dump(), actor=principal.actor, detail=message,
               expected="applying")
    return ApplyResult(plan_id, plan.kind, action, status, False, tuple(cluster.writes[first_write:]),
                       kind.steps(progress), message)


def _preview_result(
    plan_id: str, kind: str, status: str, writes: tuple[WriteRecord, ...], steps: tuple[StepOutcome, ...],
) -> ApplyResult:
    """A dry run's answer. A step the rollout would skip (a PodDisruptionBudget that will refuse
    an eviction) makes the preview `blocked` (not ok) and names it, so nobody applies a plan
    believing every node will change; the preview is still recorded, because applying anyway
    (the blocked nodes skipped, the rest changed) is a legitimate choice once it has been seen."""
    message = f"dry run: {len(writes)} write(s) accepted by the API server, none stored"
    blocked = [s for s in steps if s.state == "blocked"]
    if not blocked:
        return ApplyResult(plan_id, kind, "dry-run", status, True, writes, steps, message)
    skipped = "; ".join(f"{s.object} would be skipped: {s.detail}" for s in blocked)
    return ApplyResult(plan_id, kind, "dry-run", "blocked", True, writes, steps, f"{message}; {skipped}")


def _admit(
    wh: PlanWarehouse, plan_id: str, *, principal: Principal, settings: Settings, cluster: ClusterGateway,
    audit: Auditor, dry_run: bool, now: datetime | None,
) -> PlanRecord:
    """The approval policy for an apply or a dry run, in its documented order."""
    action = "dry-run" if dry_run else "apply"
    policy = ApprovalPolicy.of(settings)
    policy.require_admin(wh, principal, plan_id=plan_id, action=action, now=now)
    record = policy.load_fresh(wh, plan_id, actor=principal.actor, now=now, mark=not dry_run)
    allowed = {"approved", "proposed"} if dry_run else {"approved"} | RESUMABLE
    if record.status not in allowed:
        hint = "approve it first" if record.status == "proposed" else "nothing to do"
        raise PlanError(f"plan {plan_id}: is {record.status}; cannot {action} it ({hint})")
    if record.status in ("approved", "proposed"):
        policy.require_unmoved(wh, record, cluster=cluster, audit=audit, mark=not dry_run, now=now)
    if not dry_run:
        policy.require_preview(wh, record, now=now)
    return record


# 3. Rollback ---------------------------------------------------------------------------------------
def rollback(
    wh: PlanWarehouse, plan_id: str, *, principal: Principal, settings: Settings, cluster: ClusterGateway,
    now: datetime | None = None,
) -> ApplyResult:
    """Restore the recorded before-state of an applied (or failed / interrupted) plan, through the
    same guarded writes; the plan ends `rolled_back` when every object is back."""
    from gpuledger.optimizer.plan.store import load_record, set_status

    ApprovalPolicy.of(settings).require_admin(wh, principal, plan_id=plan_id, action="roll back", now=now)
    record = load_record(wh, plan_id)
    if record.status not in ROLLBACKABLE:
        raise PlanError(f"plan {plan_id}: is {record.status}; only an applied, failed or interrupted plan "
                        "can be rolled back")
    kind = rollout_for(record.plan.kind)
    applied = Progress.load(record.progress, kind.progress)
    audit = Auditor(wh, principal.actor, plan_id, clock=Clock(now))
    ctx = RolloutContext(plan=record.plan, gateway=cluster, audit=audit, settings=settings,
                         progress=Progress(), save=lambda p: None)
    first_write = len(cluster.writes)
    audit.record("rollback.start", f"plan/{plan_id}")
    try:
        outcome = kind.rollback(ctx, applied)
    except GpuledgerError as exc:
        audit.record("rollback.failed", f"plan/{plan_id}", result="failed", detail=str(exc))
        raise
    writes = tuple(cluster.writes[first_write:])
    if outcome.problems:
        message = "rollback incomplete: " + "; ".join(outcome.problems)
        audit.record("rollback.failed", f"plan/{plan_id}", result="failed", detail=message)
        return ApplyResult(plan_id, record.plan.kind, "rollback", record.status, False, writes, outcome.steps,
                           message)
    set_status(wh, plan_id, "rolled_back", actor=principal.actor, detail="before-states restored", now=now,
               expected=record.status)
    return ApplyResult(plan_id, record.plan.kind, "rollback", "rolled_back", False, writes, outcome.steps,
                       "every recorded before-state restored")
