"""The frozen Plan: what the optimizer proposes, a human approves and the actuator applies.

This module is the optimizer ↔ actuator contract and nothing else: frozen pydantic types and
their JSON form. A plan is computed from one observed cluster state and is only valid against
that state: it carries a fingerprint of it (`observed` objects with their resourceVersion and a
hash of the part of them the plan depends on). The actuator recomputes `state_hash` on the live
objects and refuses the plan when any differs (`stale`).

Plan kinds are registered, not listed: `PLAN_KINDS` (a `core.registry.Registry`) holds each
kind's optimizer-stage part (`PlanKind`: its changes model, its table, its one-line summary),
discovered as `optimizer.plan.kinds.<name>`; the actuator keeps the other part, the rollout, in
its own registry (`actuator.plan_kinds`). A new kind is one module in each (docs/decisions/0154).

Where the rest lives: the lifecycle (statuses and allowed moves) in `optimizer.plan.status`, the
typed store (save, load, list, compare-and-set status changes, expiry) in `optimizer.plan.store`,
its SQL in `warehouse.plans` and `warehouse.queries.plans`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    model_validator,
)

from gpuledger.core.errors import PlanError, SolverError
from gpuledger.core.registry import Registry
from gpuledger.optimizer.plan.evaluation import Evaluation


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class PlanChanges(_Frozen):
    """What a plan changes: each kind's changes model derives from this, with `kind` set to the
    kind's name (`kind: Literal["mig"] = "mig"`)."""

    kind: str


@dataclass(frozen=True)
class PlanKind:
    """One plan kind's optimizer-stage part, registered in `PLAN_KINDS` by its kind module."""

    changes: type[PlanChanges]
    """The model of its `Plan.changes` (the JSON of a stored plan is read back into it)."""
    render: Callable[[Any], str]
    """Its changes as a table, for `plans show` (given `plan.changes`)."""
    summary: Callable[[Plan], str]
    """One line for `plans list`."""


PLAN_KINDS: Registry[PlanKind] = Registry(
    "plan kind", error=PlanError, package="gpuledger.optimizer.plan.kinds")
"""Every plan kind: `optimizer.plan.kinds.<name>` registers itself, imported on first use."""


# 1. The observed state a plan depends on --------------------------------------------------------
def state_hash(value: Any) -> str:
    """Hash of a JSON-able value (canonical: sorted keys, no spaces); the actuator uses the same."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ObservedObject(_Frozen):
    """A cluster object the plan was computed from.

    `state` is `state_hash` of the part the plan depends on: for a Node
    `{"mig.config": <label value or None>, "gpus": {index: <layout>}}` when the layouts are
    known, for a ClusterQueue `{"cohortName": ..., "resourceGroups": [...]}`, for a Volcano
    Queue `{"cohort": ..., "deserved": ..., "capability": ..., "guarantee": ...}`.
    """

    kind: Literal["Node", "ClusterQueue", "Queue", "Fleet"]
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
    serving: bool = False
    """A serving workload's pod (its eviction interrupts traffic)."""


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


class MigChanges(PlanChanges):
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


class QuotaChanges(PlanChanges):
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
    serving_pods_evicted: int | None = None
    """Of those, pods of serving workloads (Deployments, StatefulSets)."""
    slices_stranded_before: int | None = None
    slices_stranded_after: int | None = None
    unmet_instances: int | None = None
    unmet_slices: int | None = None
    spare_instances: int | None = None
    """MIG instances the plan creates beyond what the demand asks for."""
    spare_slices: int | None = None
    """Their compute slices (with stranded slices: the slices serving no demand)."""
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


# 5. The plan ------------------------------------------------------------------------------------
class Plan(_Frozen):
    id: str
    kind: str
    """A registered plan kind (`PLAN_KINDS`)."""
    created_at: AwareDatetime
    fingerprint: str
    observed: tuple[ObservedObject, ...] = ()
    inputs: dict[str, str] = Field(default_factory=dict, description="what the plan was computed from")
    changes: SerializeAsAny[PlanChanges]
    """The kind's own changes model (`PLAN_KINDS.get(kind).changes`), dumped as that model."""
    effect: Effect
    solver: SolverInfo
    baselines: tuple[Baseline, ...] = ()
    warnings: tuple[str, ...] = ()
    evaluation: Evaluation | None = Field(
        default=None, description="how the effect was measured (quota plans: the backtest)")

    @property
    def proposes_nothing(self) -> str | None:
        """Why this plan must not be proposed (no measured gain), or None."""
        e = self.evaluation
        return None if e is None or e.verdict == "propose" else e.reason or e.verdict

    @model_validator(mode="before")
    @classmethod
    def _changes_of_their_kind(cls, data: Any) -> Any:
        """JSON changes are read into the model their `kind` registered (an unknown kind is a
        validation error naming the known ones)."""
        if isinstance(data, Mapping) and isinstance(data.get("changes"), Mapping):
            model = _kind(str(data["changes"].get("kind"))).changes
            data = {**data, "changes": model.model_validate(data["changes"])}
        return data

    @model_validator(mode="after")
    def _kind_matches(self) -> Plan:
        model = _kind(self.kind).changes
        if self.changes.kind != self.kind:
            raise ValueError(f"plan kind {self.kind} carries {self.changes.kind} changes")
        if not isinstance(self.changes, model):
            found = type(self.changes).__name__
            raise ValueError(f"plan kind {self.kind} carries {found}, not {model.__name__}")
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


def _kind(name: str) -> PlanKind:
    """The registered kind `name`; a `ValueError` (so pydantic reports it) when there is none.

    A solver error (the command's deadline firing while the kind module imports) is not a bad
    plan: it passes through pydantic untouched, so the command ends with its one time-limit line.
    """
    try:
        return PLAN_KINDS.get(name)
    except SolverError:
        raise
    except PlanError as exc:
        raise ValueError(str(exc)) from None


def new_plan_id(kind: str, created_at: datetime, fingerprint: str, body_hint: str = "") -> str:
    """`mig-20261105-120000-3fa2c1`: kind, UTC creation time and a short content hash."""
    digest = hashlib.sha256(f"{fingerprint}|{body_hint}|{created_at.isoformat()}".encode()).hexdigest()
    return f"{kind}-{created_at:%Y%m%d-%H%M%S}-{digest[:6]}"
