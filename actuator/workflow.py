"""The plan workflow: approve, reject, expire, apply (or dry-run) and roll back.

These plain functions are what both the CLI (`gpuledger plans …`) and the dashboard's buttons
call, so the rules are enforced on the server side in one place:

- approving, rejecting, applying and rolling back need the `admin` role (`core.access`);
- a plan older than `settings.plans.expire_after_hours` is expired, never approved or applied;
- only an approved plan is applied; before its first write the cluster is re-read and compared
  with the plan's fingerprint, and a plan whose state moved is marked `stale` with nothing
  written (`ConflictingPlanError`), so the optimizer can re-plan;
- an interrupted apply (`applying`) or a failed one is resumed from its progress record; from
  then on each step checks its own object (the fingerprint cannot match any more: the plan's
  own writes changed the objects);
- every action lands in the audit log (status moves via `optimizer.plan.set_status`, cluster
  writes via the rollouts, refusals here).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuledger.actuator.audit import Auditor
from gpuledger.actuator.context import RolloutContext
from gpuledger.actuator.gateway import ClusterGateway, WriteRecord
from gpuledger.actuator.progress import MigProgress, Progress, QuotaProgress
from gpuledger.core.access import Principal, require_admin
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import AccessDeniedError, ConflictingPlanError, GpuledgerError, PlanError

if TYPE_CHECKING:
    from gpuledger.optimizer.plan import PlanRecord
    from gpuledger.warehouse import Warehouse

RESUMABLE = frozenset({"applying", "failed"})
ROLLBACKABLE = frozenset({"applied", "applying", "failed"})


@dataclass(frozen=True)
class StepOutcome:
    """One node (MIG) or one ClusterQueue write (quota) and where it ended."""

    object: str
    state: str
    detail: str | None = None


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
        return self.status in ("applied", "rolled_back") or (self.dry_run and self.status != "failed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id, "kind": self.kind, "action": self.action, "status": self.status,
            "dry_run": self.dry_run, "message": self.message,
            "writes": [{"object": w.object, "verb": w.verb, "patch": w.patch, "dry_run": w.dry_run}
                       for w in self.writes],
            "steps": [{"object": s.object, "state": s.state, "detail": s.detail} for s in self.steps],
        }


@dataclass(frozen=True)
class _Clock:
    """The audit clock of one call: the caller's fixed `now` when given, else the real time."""

    fixed: datetime | None = None

    def __call__(self) -> datetime:
        return self.fixed or utcnow()


# 1. Approval ---------------------------------------------------------------------------------------
def approve(
    wh: Warehouse, plan_id: str, principal: Principal, settings: Settings, now: datetime | None = None,
) -> PlanRecord:
    """Approve a proposed plan (admin only; refuses an expired plan and marks it expired)."""
    from gpuledger.optimizer.plan import set_status

    _require_admin(wh, principal, plan_id, "approve", now)
    record = _load_fresh(wh, plan_id, settings, now, principal)
    if record.status != "proposed":
        raise PlanError(f"plan {plan_id}: is {record.status}; only a proposed plan can be approved")
    return set_status(wh, plan_id, "approved", actor=principal.user, detail="approved", now=now)


def reject(  # noqa: PLR0917 - the positional signature is the dashboard's contract
    wh: Warehouse, plan_id: str, principal: Principal, settings: Settings, reason: str,
    now: datetime | None = None,
) -> PlanRecord:
    """Reject a proposed or approved plan with a reason (admin only)."""
    from gpuledger.optimizer.plan import load_record, set_status

    _require_admin(wh, principal, plan_id, "reject", now)
    record = load_record(wh, plan_id)
    if record.status not in ("proposed", "approved"):
        raise PlanError(
            f"plan {plan_id}: is {record.status}; only a proposed or approved plan can be rejected"
        )
    return set_status(wh, plan_id, "rejected", actor=principal.user, detail=reason or "rejected", now=now)


def expire(wh: Warehouse, settings: Settings, now: datetime | None = None) -> list[str]:
    """Mark every proposed or approved plan older than the configured age as expired."""
    from gpuledger.optimizer.plan import expire_plans

    return expire_plans(wh, timedelta(hours=settings.plans.expire_after_hours), now=now)


# 2. Apply ------------------------------------------------------------------------------------------
def connect(settings: Settings, kubeconfig: str | None = None) -> ClusterGateway:
    """The gateway for `--kubeconfig`, else the configured kubeconfig, else in-cluster / ~/.kube."""
    k8s = settings.kubernetes
    return ClusterGateway.from_kubeconfig(kubeconfig or k8s.kubeconfig, k8s.context)


def apply(  # noqa: PLR0917 - the positional signature is the dashboard's contract
    wh: Warehouse, plan_id: str, principal: Principal, settings: Settings, cluster: ClusterGateway,
    dry_run: bool = False, now: datetime | None = None,
) -> ApplyResult:
    """Apply an approved plan (or resume an interrupted one); `dry_run` sends every write with
    dryRun=All only and changes nothing, neither in the cluster nor in the plan's status.

    Steps:
    1. Admin check; load the plan; refuse what is not approved / resumable (dry run: also proposed).
    2. Expiry: an approved plan older than the limit is marked expired and refused.
    3. First apply only: the fingerprint re-check; any drift → `stale`, nothing written.
    4. Move to `applying` (progress kept), run the MIG or quota rollout, checkpointing each step.
    5. Move to `applied`, or `failed` with the reason (resumable by running apply again).
    """
    from gpuledger.optimizer.plan import set_status

    action = "dry-run" if dry_run else "apply"
    _require_admin(wh, principal, plan_id, action, now)
    # 1.–2.
    record = _load_fresh(wh, plan_id, settings, now, principal, mark=not dry_run)
    allowed = {"approved", "proposed"} if dry_run else {"approved"} | RESUMABLE
    if record.status not in allowed:
        hint = "approve it first" if record.status == "proposed" else "nothing to do"
        raise PlanError(f"plan {plan_id}: is {record.status}; cannot {action} it ({hint})")
    plan = record.plan
    audit = Auditor(wh, principal.user, plan_id, clock=_Clock(now))
    # 3.
    if record.status in ("approved", "proposed"):
        drifted = _drift(cluster, plan)
        if drifted:
            more = f" (+{len(drifted) - 5} more)" if len(drifted) > 5 else ""
            text = "; ".join(str(d) for d in drifted[:5]) + more
            if not dry_run:
                audit.record("apply.refused", f"plan/{plan_id}", result="stale", detail=text)
                set_status(wh, plan_id, "stale", actor=principal.user, detail=f"cluster moved: {text}",
                           now=now)
            raise ConflictingPlanError(
                f"plan {plan_id}: the cluster moved since it was computed ({text}); re-plan"
            )
    progress = Progress.load(record.progress) if record.status in RESUMABLE else Progress()
    if record.status == "failed":
        _retry_failed(progress)
    # 4.
    ctx = RolloutContext(
        plan=plan, gateway=cluster, audit=audit, settings=settings, progress=progress,
        save=lambda p: _save(wh, plan_id, p, principal.user),
        dry_run=dry_run,
    )
    first_write = len(cluster.writes)
    if dry_run:
        with cluster.dry_run_only():
            _rollout(ctx)
        writes = tuple(cluster.writes[first_write:])
        audit.record("apply.dry_run", f"plan/{plan_id}", after=[w.object for w in writes], result="dry-run")
        return ApplyResult(plan_id, plan.kind, action, record.status, True, writes, _steps(progress),
                           f"dry run: {len(writes)} write(s) accepted by the API server, none stored")
    set_status(wh, plan_id, "applying", progress.dump(), actor=principal.user,
               detail="resume" if record.status in RESUMABLE else "start", now=now)
    try:
        _rollout(ctx)
    except GpuledgerError as exc:
        set_status(wh, plan_id, "failed", progress.dump(), actor=principal.user, detail=str(exc))
        raise
    # 5.
    problems = _problems(progress)
    status = "failed" if problems else "applied"
    message = "; ".join(problems) if problems else "every change applied and verified"
    set_status(wh, plan_id, status, progress.dump(), actor=principal.user, detail=message)
    return ApplyResult(plan_id, plan.kind, action, status, False, tuple(cluster.writes[first_write:]),
                       _steps(progress), message)


def _save(wh: Warehouse, plan_id: str, progress: Progress, actor: str) -> None:
    from gpuledger.optimizer.plan import set_status

    set_status(wh, plan_id, "applying", progress.dump(), actor=actor, detail="progress")


def _rollout(ctx: RolloutContext) -> None:
    from gpuledger.actuator.mig_rollout import apply_mig
    from gpuledger.actuator.quota_rollout import apply_quota

    if ctx.plan.kind == "mig":
        apply_mig(ctx)
    else:
        apply_quota(ctx)


def _drift(cluster: ClusterGateway, plan: Any) -> list[Any]:
    from gpuledger.actuator.fingerprint import drift

    return drift(cluster, plan)


def _retry_failed(progress: Progress) -> None:
    """Applying a failed plan again retries its failed and blocked nodes (from their before-state)."""
    if isinstance(progress.apply, MigProgress):
        progress.apply.stopped = None
        for node in progress.apply.nodes:
            if node.phase in ("failed", "blocked"):
                node.phase, node.detail, node.labeled_at = "pending", None, None


def _problems(progress: Progress) -> list[str]:
    prog = progress.apply
    if isinstance(prog, MigProgress):
        out = [f"Node/{n.node} {n.phase}: {n.detail}" for n in prog.nodes if n.phase in ("failed", "blocked")]
        out += [f"Node/{n.node} not reached" for n in prog.nodes if n.phase == "pending" and prog.stopped]
        return out
    if isinstance(prog, QuotaProgress):
        return [f"ClusterQueue/{s.cluster_queue} {s.phase} not written" for s in prog.steps if not s.done]
    return ["nothing was applied"]


def _steps(progress: Progress) -> tuple[StepOutcome, ...]:
    prog = progress.apply
    if isinstance(prog, MigProgress):
        return tuple(StepOutcome(f"Node/{n.node}", n.phase, n.detail) for n in prog.nodes)
    if isinstance(prog, QuotaProgress):
        return tuple(
            StepOutcome(f"ClusterQueue/{s.cluster_queue}", f"{s.phase}:{'done' if s.done else 'todo'}")
            for s in prog.steps
        )
    return ()


# 3. Rollback ---------------------------------------------------------------------------------------
def rollback(  # noqa: PLR0917 - same shape as apply
    wh: Warehouse, plan_id: str, principal: Principal, settings: Settings, cluster: ClusterGateway,
    now: datetime | None = None,
) -> ApplyResult:
    """Restore the recorded before-state of an applied (or failed / interrupted) plan, through the
    same guarded writes; the plan ends `rolled_back` when every object is back."""
    from gpuledger.actuator.mig_rollout import rollback_mig
    from gpuledger.actuator.quota_rollout import rollback_quota
    from gpuledger.optimizer.plan import load_record, set_status

    _require_admin(wh, principal, plan_id, "roll back", now)
    record = load_record(wh, plan_id)
    if record.status not in ROLLBACKABLE:
        raise PlanError(f"plan {plan_id}: is {record.status}; only an applied, failed or interrupted plan "
                        "can be rolled back")
    applied = Progress.load(record.progress)
    audit = Auditor(wh, principal.user, plan_id, clock=_Clock(now))
    ctx = RolloutContext(plan=record.plan, gateway=cluster, audit=audit, settings=settings,
                         progress=Progress(), save=lambda p: None)
    first_write = len(cluster.writes)
    audit.record("rollback.start", f"plan/{plan_id}")
    steps: tuple[StepOutcome, ...] = ()
    problems: list[str] = []
    try:
        if isinstance(applied.apply, MigProgress):
            nodes = rollback_mig(ctx, applied.apply)
            steps = tuple(StepOutcome(f"Node/{n.node}", n.phase, n.detail) for n in nodes)
            problems = [f"Node/{n.node} {n.phase}: {n.detail}" for n in nodes if n.phase != "done"]
        elif isinstance(applied.apply, QuotaProgress):
            quota = rollback_quota(ctx)
            steps = tuple(StepOutcome(f"ClusterQueue/{s.cluster_queue}", f"{s.phase}:done")
                          for s in quota.steps)
    except GpuledgerError as exc:
        audit.record("rollback.failed", f"plan/{plan_id}", result="failed", detail=str(exc))
        raise
    writes = tuple(cluster.writes[first_write:])
    if problems:
        message = "rollback incomplete: " + "; ".join(problems)
        audit.record("rollback.failed", f"plan/{plan_id}", result="failed", detail=message)
        return ApplyResult(plan_id, record.plan.kind, "rollback", record.status, False, writes, steps,
                           message)
    set_status(wh, plan_id, "rolled_back", actor=principal.user, detail="before-states restored", now=now)
    return ApplyResult(plan_id, record.plan.kind, "rollback", "rolled_back", False, writes, steps,
                       "every recorded before-state restored")


# 4. Shared checks ----------------------------------------------------------------------------------
def _require_admin(
    wh: Warehouse, principal: Principal, plan_id: str, action: str, now: datetime | None,
) -> None:
    """`require_admin`, with the refusal itself written to the audit log."""
    try:
        require_admin(principal, f"{action} plan {plan_id}")
    except AccessDeniedError as exc:
        Auditor(wh, principal.user, plan_id, clock=_Clock(now)).record(
            f"plan.{action.replace(' ', '_')}", f"plan/{plan_id}", result="denied", detail=str(exc))
        raise


def _load_fresh(
    wh: Warehouse, plan_id: str, settings: Settings, now: datetime | None, principal: Principal,
    *, mark: bool = True,
) -> PlanRecord:
    """Load the plan; a proposed/approved one past its age limit is marked expired and refused."""
    from gpuledger.optimizer.plan import EXPIRABLE, load_record, set_status

    record = load_record(wh, plan_id)
    if record.status == "expired":
        raise PlanError(f"plan {plan_id}: expired; re-plan")
    limit = timedelta(hours=settings.plans.expire_after_hours)
    moment = now or utcnow()
    if record.status in EXPIRABLE and moment - record.plan.created_at > limit:
        if mark:
            set_status(wh, plan_id, "expired", actor=principal.user,
                       detail=f"older than plans.expire_after_hours={settings.plans.expire_after_hours:g}",
                       now=now)
        raise PlanError(
            f"plan {plan_id}: created {record.plan.created_at:%Y-%m-%d %H:%M} UTC, older than "
            f"plans.expire_after_hours={settings.plans.expire_after_hours:g}; it expired, re-plan"
        )
    return record
