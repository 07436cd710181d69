"""The frozen Plan: what the optimizer proposes, a human approves and the actuator applies.

A plan is computed from one observed cluster state and is only valid against that state: it
carries a fingerprint of it (`observed` objects with their resourceVersion and a hash of the
part of them the plan depends on). The actuator recomputes `state_hash` on the live objects
and refuses the plan when any differs (`stale`).

Plans live in the warehouse table `plans` (`core.frames.PLANS`): the body is the frozen JSON,
status and progress are the only mutable columns. Every status change goes through
`set_status`, which checks `TRANSITIONS` (the one table of allowed moves) and appends an
audit record, so neither the CLI, the dashboard nor the actuator re-implements the rules.

    proposed → approved → applying → applied → rolled_back
        │          │          ├─→ failed → applying (resume) | rolled_back
        │          │          └─→ rolled_back
        └──────────┴─→ rejected | expired | stale
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from gpuledger.core.errors import PlanError

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

PlanKind = Literal["mig", "quota"]
PlanStatus = Literal[
    "proposed", "approved", "applying", "applied", "failed", "rolled_back",
    "rejected", "expired", "stale",
]
STATUSES: tuple[PlanStatus, ...] = (
    "proposed", "approved", "applying", "applied", "failed", "rolled_back",
    "rejected", "expired", "stale",
)

TRANSITIONS: dict[PlanStatus, frozenset[PlanStatus]] = {
    "proposed": frozenset({"approved", "rejected", "expired", "stale"}),
    "approved": frozenset({"applying", "rejected", "expired", "stale"}),
    # applying → applying records progress (resumable apply)
    "applying": frozenset({"applying", "applied", "failed", "rolled_back"}),
    "failed": frozenset({"applying", "rolled_back"}),
    "applied": frozenset({"rolled_back"}),
    "rolled_back": frozenset(),
    "rejected": frozenset(),
    "expired": frozenset(),
    "stale": frozenset(),
}
"""Allowed status moves: `TRANSITIONS[current]` is the set of statuses it may move to."""

TERMINAL: frozenset[PlanStatus] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
EXPIRABLE: frozenset[PlanStatus] = frozenset({"proposed", "approved"})


def check_transition(plan_id: str, current: str, new: str) -> None:
    """Raise `PlanError` unless `current → new` is in `TRANSITIONS`."""
    if current not in TRANSITIONS:
        raise PlanError(f"plan {plan_id}: stored status {current!r} is unknown")
    if new not in TRANSITIONS:
        raise PlanError(f"plan {plan_id}: status {new!r} is unknown (known: {', '.join(STATUSES)})")
    allowed: frozenset[str] = TRANSITIONS[current]
    if new not in allowed:
        options = ", ".join(sorted(allowed)) or "none: it is final"
        raise PlanError(f"plan {plan_id}: cannot move from {current} to {new} (allowed: {options})")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# 1. The observed state a plan depends on --------------------------------------------------------
def state_hash(value: Any) -> str:
    """Hash of a JSON-able value (canonical: sorted keys, no spaces); the actuator uses the same."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ObservedObject(_Frozen):
    """A cluster object the plan was computed from.

    `state` is `state_hash` of the part the plan depends on: for a Node
    `{"mig.config": <label value or None>, "gpus": {index: <layout>}}` when the layouts are
    known, for a ClusterQueue `{"cohortName": ..., "resourceGroups": [...]}`.
    """

    kind: Literal["Node", "ClusterQueue", "Fleet"]
    name: str
    resource_version: str | None = None
    state: str


def fingerprint_of(observed: tuple[ObservedObject, ...]) -> str:
    """The plan fingerprint: one hash over every observed object (order-independent)."""
    parts = sorted(f"{o.kind}/{o.name}@{o.resource_version or ''}#{o.state}" for o in observed)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


# 2. MIG changes ---------------------------------------------------------------------------------
_ENABLED = AliasChoices("mig-enabled", "mig_enabled")
_DEVICES = AliasChoices("mig-devices", "mig_devices")


class GpuConfig(_Frozen):
    """One GPU's MIG configuration: disabled (a whole GPU) or enabled with instance counts."""

    mig_enabled: bool = Field(validation_alias=_ENABLED, serialization_alias="mig-enabled")
    mig_devices: dict[str, int] = Field(
        default_factory=dict, validation_alias=_DEVICES, serialization_alias="mig-devices"
    )

    def label(self) -> str:
        if not self.mig_enabled:
            return "whole (MIG off)"
        if not self.mig_devices:
            return "MIG on, empty"
        return " + ".join(f"{n}×{p}" for p, n in sorted(self.mig_devices.items()))


class MigPartedGroup(_Frozen):
    """One item of a mig-parted config entry, in NVIDIA's own field names."""

    devices: tuple[int, ...]
    mig_enabled: bool = Field(validation_alias=_ENABLED, serialization_alias="mig-enabled")
    mig_devices: dict[str, int] = Field(
        default_factory=dict, validation_alias=_DEVICES, serialization_alias="mig-devices"
    )

    def to_mig_parted(self) -> dict[str, Any]:
        item: dict[str, Any] = {"devices": list(self.devices), "mig-enabled": self.mig_enabled}
        if self.mig_enabled:
            item["mig-devices"] = dict(sorted(self.mig_devices.items()))
        return item


class PodRef(_Frozen):
    namespace: str
    pod: str
    gpu_index: int
    profile: str | None = None
    evictable: bool = True


class GpuChange(_Frozen):
    index: int
    uuid: str | None = None
    before: GpuConfig
    after: GpuConfig


class NodeMigChange(_Frozen):
    """A node's new MIG configuration: the whole mig-parted entry and what it costs."""

    node: str
    model: str
    mig_config: str = Field(description="value for the node label nvidia.com/mig.config")
    previous_mig_config: str | None = None
    mig_parted: tuple[MigPartedGroup, ...] = Field(description="the entry, covering every GPU")
    gpus_changed: tuple[GpuChange, ...]
    pods_to_evict: tuple[PodRef, ...] = ()

    def mig_parted_entry(self) -> list[dict[str, Any]]:
        return [g.to_mig_parted() for g in self.mig_parted]


class MigChanges(_Frozen):
    kind: Literal["mig"] = "mig"
    nodes: tuple[NodeMigChange, ...]

    def mig_parted_config(self) -> dict[str, Any]:
        """The mig-parted ConfigMap document holding every entry this plan uses."""
        configs = {n.mig_config: n.mig_parted_entry() for n in self.nodes}
        return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}


# 3. Quota changes -------------------------------------------------------------------------------
class QuotaChange(_Frozen):
    """One (ClusterQueue, flavor, resource) quota, before and after; None means unset."""

    cluster_queue: str
    cohort: str | None = None
    flavor: str
    resource: str
    old_nominal: float
    new_nominal: float
    old_borrowing_limit: float | None = None
    new_borrowing_limit: float | None = None
    old_lending_limit: float | None = None
    new_lending_limit: float | None = None

    @property
    def changed(self) -> bool:
        return (
            self.old_nominal != self.new_nominal
            or self.old_borrowing_limit != self.new_borrowing_limit
            or self.old_lending_limit != self.new_lending_limit
        )


class ClusterQueueUpdate(_Frozen):
    """The whole new `spec.resourceGroups` list of one ClusterQueue (Kueue treats it atomically)."""

    name: str
    resource_version: str | None = None
    resource_groups: tuple[dict[str, Any], ...]


class QuotaChanges(_Frozen):
    kind: Literal["quota"] = "quota"
    quotas: tuple[QuotaChange, ...]
    cluster_queues: tuple[ClusterQueueUpdate, ...]


# 4. Effect, solver, baselines -------------------------------------------------------------------
class Effect(_Frozen):
    """What the plan is expected to achieve (None: not meaningful for this kind)."""

    gpus_used_before: int | None = None
    gpus_used_after: int | None = None
    gpus_freed: int | None = None
    gpus_changed: int | None = None
    pods_evicted: int | None = None
    slices_stranded_before: int | None = None
    slices_stranded_after: int | None = None
    unmet_instances: int | None = None
    unmet_slices: int | None = None
    slice_lower_bound: int | None = None
    pending_gpu_minutes_before: float | None = None
    pending_gpu_minutes_after: float | None = None
    idle_quota_gpu_minutes_before: float | None = None
    idle_quota_gpu_minutes_after: float | None = None
    monthly_cost_saving: float | None = None
    currency: str | None = None


class StageResult(_Frozen):
    """One lexicographic stage: its objective value and proven bound (None: not known)."""

    name: str
    status: str
    objective: float | None
    bound: float | None
    wall_s: float


class SolverInfo(_Frozen):
    solver: str = "cp-sat"
    status: str = Field(description="OPTIMAL when every stage was proven optimal, else FEASIBLE")
    wall_s: float
    time_limit_s: float
    stages: tuple[StageResult, ...] = ()

    @property
    def proven_optimal(self) -> bool:
        return self.status == "OPTIMAL"


class Baseline(_Frozen):
    """Another method run on the same input, for comparison (figures use Effect's names)."""

    name: str
    figures: dict[str, float | int | None]
    note: str = ""


Changes = Annotated[MigChanges | QuotaChanges, Field(discriminator="kind")]


# 5. The plan ------------------------------------------------------------------------------------
class Plan(_Frozen):
    id: str
    kind: PlanKind
    created_at: AwareDatetime
    fingerprint: str
    observed: tuple[ObservedObject, ...] = ()
    inputs: dict[str, str] = Field(default_factory=dict, description="what the plan was computed from")
    changes: Changes
    effect: Effect
    solver: SolverInfo
    baselines: tuple[Baseline, ...] = ()
    warnings: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _kind_matches(self) -> Plan:
        if self.changes.kind != self.kind:
            raise ValueError(f"plan kind {self.kind} carries {self.changes.kind} changes")
        return self

    def to_json_dict(self) -> dict[str, Any]:
        """The stable JSON form (mig-parted fields under NVIDIA's names)."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), sort_keys=False)

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> Plan:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        return cls.model_validate(data)


def new_plan_id(kind: str, created_at: datetime, fingerprint: str, body_hint: str = "") -> str:
    """`mig-20261105-120000-3fa2c1`: kind, UTC creation time and a short content hash."""
    digest = hashlib.sha256(f"{fingerprint}|{body_hint}|{created_at.isoformat()}".encode()).hexdigest()
    return f"{kind}-{created_at:%Y%m%d-%H%M%S}-{digest[:6]}"


# 6. The store (warehouse table `plans`) ---------------------------------------------------------
class PlanRecord(_Frozen):
    """A stored plan with its mutable status and progress."""

    plan: Plan
    status: PlanStatus
    updated_at: AwareDatetime
    progress: Any = None


def save_plan(wh: Warehouse, plan: Plan, *, now: datetime | None = None, actor: str = "optimizer") -> None:
    """Store `plan` as `proposed`. Saving the same plan again is a no-op; another body with the
    same id is refused (plans are frozen)."""
    from gpuledger.core.config import utcnow

    existing = _row(wh, plan.id)
    if existing is not None:
        if Plan.from_json(existing["body"]) == plan:
            return
        raise PlanError(f"plan {plan.id}: another plan with this id is already stored")
    moment = now or utcnow()
    _write(wh, plan, "proposed", moment, None)
    wh.append_audit({
        "occurred_at": moment, "actor": actor, "plan_id": plan.id, "action": "plan.propose",
        "object": f"plan/{plan.id}", "before_state": None,
        "after_state": json.dumps({"status": "proposed"}), "result": "ok",
        "detail": f"{plan.kind} plan, fingerprint {plan.fingerprint}",
    })


def load_record(wh: Warehouse, plan_id: str) -> PlanRecord:
    row = _row(wh, plan_id)
    if row is None:
        raise PlanError(f"plan {plan_id}: not found in the warehouse table plans")
    return _record(row)


def load_plan(wh: Warehouse, plan_id: str) -> Plan:
    """The frozen plan with this id (PlanError when absent)."""
    return load_record(wh, plan_id).plan


def list_plans(
    wh: Warehouse, status: str | None = None, *, kind: str | None = None
) -> list[PlanRecord]:
    """Stored plans, newest first, optionally only those in `status` / of `kind`."""
    if status is not None and status not in TRANSITIONS:
        raise PlanError(f"plan status {status!r} is unknown (known: {', '.join(STATUSES)})")
    where: list[str] = []
    params: list[str] = []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if kind is not None:
        where.append("kind = ?")
        params.append(kind)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    frame = wh.query(
        f"SELECT plan_id, status, updated_at, body, progress FROM plans {clause} "
        "ORDER BY created_at DESC, plan_id",
        params,
    )
    return [_record(row) for row in frame.iter_rows(named=True)]


def set_status(
    wh: Warehouse, plan_id: str, status: str, progress: Any = None, *,
    actor: str = "gpuledger", detail: str | None = None, now: datetime | None = None,
) -> PlanRecord:
    """Move a plan to `status` (checked against `TRANSITIONS`), optionally storing `progress`
    (JSON-able; kept when None), and append an audit record. Returns the updated record."""
    from gpuledger.core.config import utcnow

    record = load_record(wh, plan_id)
    check_transition(plan_id, record.status, status)
    moment = now or utcnow()
    kept = record.progress if progress is None else progress
    _write(wh, record.plan, status, moment, kept)
    wh.append_audit({
        "occurred_at": moment, "actor": actor, "plan_id": plan_id, "action": "plan.status",
        "object": f"plan/{plan_id}", "before_state": json.dumps({"status": record.status}),
        "after_state": json.dumps({"status": status}), "result": "ok", "detail": detail,
    })
    return load_record(wh, plan_id)


def expire_plans(wh: Warehouse, max_age: timedelta, *, now: datetime | None = None) -> list[str]:
    """Mark `proposed` / `approved` plans older than `max_age` as `expired`; returns their ids."""
    from gpuledger.core.config import utcnow

    moment = now or utcnow()
    expired = []
    for record in list_plans(wh):
        if record.status in EXPIRABLE and moment - record.plan.created_at > max_age:
            set_status(wh, record.plan.id, "expired", actor="gpuledger",
                       detail=f"older than {max_age}", now=moment)
            expired.append(record.plan.id)
    return expired


def _row(wh: Warehouse, plan_id: str) -> dict[str, Any] | None:
    frame = wh.query(
        "SELECT plan_id, status, updated_at, body, progress FROM plans WHERE plan_id = ?", [plan_id]
    )
    return frame.row(0, named=True) if frame.height else None


def _record(row: Mapping[str, Any]) -> PlanRecord:
    progress = json.loads(row["progress"]) if row.get("progress") else None
    return PlanRecord(
        plan=Plan.from_json(row["body"]), status=row["status"], updated_at=row["updated_at"],
        progress=progress,
    )


def _write(wh: Warehouse, plan: Plan, status: str, moment: datetime, progress: Any) -> None:
    import polars as pl

    from gpuledger.core.frames import PLANS, polars_schema
    from gpuledger.warehouse import LoadBatch

    frame = pl.DataFrame(
        [{
            "plan_id": plan.id, "kind": plan.kind, "status": status,
            "created_at": plan.created_at, "updated_at": moment,
            "fingerprint": plan.fingerprint, "body": plan.to_json(),
            "progress": None if progress is None else json.dumps(progress, default=str),
        }],
        schema=polars_schema(PLANS),
    )
    wh.load(LoadBatch(frames={"plans": frame}))
