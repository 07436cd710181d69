"""The apply stage's part of the queue-system seam: a `QuotaWriter` per queue system.

Why: the quota rollout's safety rules (decreases first so a cohort is never over-committed,
a dry-run preflight of every final object, guarded read-modify-write, progress and audit) are
the same for every queue system; only where the quota object lives and how its planned numbers
are found and set differ. Those sit behind `QuotaWriter`; Kueue (`actuator.queues.kueue`) is the
first implementation, and another system is one more module here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from gpuledger.core.queues import DEFAULT_QUEUE_SYSTEM, queue_registry
from gpuledger.core.registry import Registry

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import Obj, ObjectRef
    from gpuledger.optimizer.plan.contract import Plan, QuotaChange


class QuotaWriter(Protocol):
    """How the actuator reads and writes one queue system's quota objects."""

    name: str
    object_kind: str
    """The kind plans name in `observed` (e.g. `ClusterQueue`)."""
    body_field: str
    """The spec field holding every quota (audit records show it before and after)."""

    def ref(self, queue: str) -> ObjectRef:
        """Where the quota object of `queue` lives in the API."""
        ...

    def body(self, obj: Obj) -> list[Any]:
        """The object's whole quota body (`spec.<body_field>`), as read."""
        ...

    def mutation(self, obj: Obj, changes: Sequence[QuotaChange]) -> Obj | None:
        """The merge patch setting the planned numbers (None: already set); raises
        `ConflictingPlanError` when a number is neither the plan's old value nor its new one."""
        ...

    def manifest_spec(self, body: Sequence[Any], changes: Sequence[QuotaChange]) -> dict[str, Any]:
        """The spec of a GitOps manifest (`actuator.export`) for a queue whose planned quota
        body is `body` (as the plan stores it): the fields a server-side apply of the plan owns,
        in the object's own shape."""
        ...


WRITERS: Registry[QuotaWriter] = queue_registry("apply", __name__)


def quota_writer(name: str = DEFAULT_QUEUE_SYSTEM) -> QuotaWriter:
    """The apply stage's part of queue system `name`."""
    return WRITERS.get(name)


def writer_for(plan: Plan) -> QuotaWriter:
    """The writer of the queue system whose objects `plan` was computed from (its observed
    kind); the default system for a plan that observed none."""
    kinds = {o.kind for o in plan.observed}
    if not kinds:
        return quota_writer()
    found = WRITERS.find(lambda w: w.object_kind in kinds)
    if found is None:
        from gpuledger.core.errors import PlanError

        raise PlanError(f"plan {plan.id}: no queue system writes {', '.join(sorted(kinds))} objects")
    return found
