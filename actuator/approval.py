"""The one approval policy for plans: who may act, which plans are too old, what must be
previewed, and when the cluster has moved. The CLI and the dashboard both go through it (via
`actuator.workflow`), so neither can drift from the other.

The rules, in the order they are checked:
1. Admin: approving, rejecting, previewing, applying and rolling back need the `admin` role; a
   refusal is written to the audit log.
2. Expiry: a proposed or approved plan older than `plans.expire_after_hours` is marked
   `expired` and refused.
3. Staleness (before the first write only): the live cluster is compared with the plan's
   fingerprint; a plan whose state moved is marked `stale` and refused, nothing written.
4. Preview before apply: a rollout starts only after a successful dry run of the same plan
   (`plans apply ID --dry-run`, or Preview on the Plans page) within `PREVIEW_VALID`. The preview
   is what the admin looked at before saying yes, so it is recorded where both front ends can
   see it: the `apply.dry_run` row the dry run writes to the audit log. Resuming an interrupted
   or failed rollout needs none (a half-applied plan cannot be dry-run against its before-state).

Every check that decides a status move passes the status it saw on to the compare-and-set
store (`optimizer.plan.store.set_status(expected=…)`), so a decision taken on a plan that
another action moved meanwhile is refused instead of overwriting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.actuator.audit import Auditor
from gpuledger.core.access import Principal, require_admin
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import AccessDeniedError, ConflictingPlanError, PlanError

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import ClusterGateway
    from gpuledger.optimizer.plan.store import PlanRecord
    from gpuledger.warehouse.plans import PlanWarehouse
    from gpuledger.warehouse.protocols import ReadableWarehouse

PREVIEW_VALID = timedelta(minutes=15)
"""How long a dry-run preview allows the real apply (the dashboard's rule, now everyone's)."""

NEEDS_PREVIEW = frozenset({"proposed", "approved"})
"""Statuses whose apply would start a rollout (a proposed one is refused for not being approved)."""


@dataclass(frozen=True)
class Clock:
    """The clock of one call: the caller's fixed `now` when given, else the real time."""

    fixed: datetime | None = None

    def __call__(self) -> datetime:
        return self.fixed or utcnow()


@dataclass(frozen=True)
class ApprovalPolicy:
    """The rules above, with the limits taken from the settings."""

    expire_after_hours: float
    preview_valid: timedelta = PREVIEW_VALID

    @classmethod
    def of(cls, settings: Settings) -> ApprovalPolicy:
        return cls(expire_after_hours=settings.plans.expire_after_hours)

    @property
    def expire_after(self) -> timedelta:
        return timedelta(hours=self.expire_after_hours)

    # 1. Admin ----------------------------------------------------------------------------------
    def require_admin(
        self, wh: PlanWarehouse, principal: Principal, *, plan_id: str, action: str, now: datetime | None,
    ) -> None:
        """`core.access.require_admin`, with the refusal itself written to the audit log."""
        try:
            require_admin(principal, f"{action} plan {plan_id}")
        except AccessDeniedError as exc:
            Auditor(wh, principal.actor, plan_id, clock=Clock(now)).record(
                f"plan.{action.replace(' ', '_')}", f"plan/{plan_id}", result="denied", detail=str(exc))
            raise

    # 2. Expiry ---------------------------------------------------------------------------------
    def load_fresh(
        self, wh: PlanWarehouse, plan_id: str, *, actor: str, now: datetime | None, mark: bool = True,
    ) -> PlanRecord:
        """Load the plan; a proposed/approved one past its age limit is marked expired and refused."""
        from gpuledger.optimizer.plan.status import EXPIRABLE
        from gpuledger.optimizer.plan.store import load_record, set_status

        record = load_record(wh, plan_id)
        if record.status == "expired":
            raise PlanError(f"plan {plan_id}: expired; re-plan")
        moment = now or utcnow()
        if record.status in EXPIRABLE and moment - record.plan.created_at > self.expire_after:
            limit = f"plans.expire_after_hours={self.expire_after_hours:g}"
            if mark:
                set_status(wh, plan_id, "expired", actor=actor, detail=f"older than {limit}", now=now,
                           expected=record.status)
            raise PlanError(
                f"plan {plan_id}: created {record.plan.created_at:%Y-%m-%d %H:%M} UTC, older than "
                f"{limit}; it expired, re-plan"
            )
        return record

    # 3. Staleness ------------------------------------------------------------------------------
    def require_unmoved(
        self, wh: PlanWarehouse, record: PlanRecord, *, cluster: ClusterGateway, audit: Auditor,
        mark: bool, now: datetime | None,
    ) -> None:
        """Refuse a plan whose observed objects changed; a real apply also marks it `stale`."""
        from gpuledger.actuator.fingerprint import drift
        from gpuledger.optimizer.plan.store import set_status

        plan_id = record.plan.id
        drifted = drift(cluster, record.plan)
        if not drifted:
            return
        more = f" (+{len(drifted) - 5} more)" if len(drifted) > 5 else ""
        text = "; ".join(str(d) for d in drifted[:5]) + more
        if mark:
            audit.record("apply.refused", f"plan/{plan_id}", result="stale", detail=text)
            set_status(wh, plan_id, "stale", actor=audit.actor, detail=f"cluster moved: {text}", now=now,
                       expected=record.status)
        raise ConflictingPlanError(
            f"plan {plan_id}: the cluster moved since it was computed ({text}); re-plan"
        )

    # 4. Preview before apply -------------------------------------------------------------------
    def require_preview(self, wh: ReadableWarehouse, record: PlanRecord, *, now: datetime | None) -> None:
        """Refuse to start a rollout that was not previewed (dry run) within `preview_valid`."""
        from gpuledger.warehouse.queries.plans import last_preview

        if record.status not in NEEDS_PREVIEW:
            return
        plan_id = record.plan.id
        seen = last_preview(wh, plan_id)
        moment = now or utcnow()
        if seen is None or moment - seen[0] > self.preview_valid:
            minutes = int(self.preview_valid.total_seconds() // 60)
            raise PlanError(
                f"plan {plan_id}: preview it (dry run) first, then apply within {minutes} min "
                f"(`gpuledger plans apply {plan_id} --dry-run`, or Preview on the Plans page)"
            )

