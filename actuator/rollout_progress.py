"""What the actuator has done so far for one plan, stored in `plans.progress` after every step.

Why: an apply can die at any point (kill -9, lost connection). Running `apply` again reads this
record and continues from the recorded step instead of starting over; the before-states kept
here are what `rollback` restores. Each step is also idempotent against the cluster (a label
that already has the wanted value is not written again), so a crash between a write and the
record of it is harmless.

Each plan kind keeps its own record (`MigProgress`, `QuotaProgress`, a new kind's in its kind
module), derived from `KindProgress`; the kind's rollout names it (`KindRollout.progress`), so
this module lists no kinds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

NodePhase = Literal["pending", "started", "cordoned", "evicted", "labeled", "done", "blocked", "failed"]
"""pending → started (before-state recorded) → cordoned → evicted → labeled → done;
`blocked`: an eviction was refused, the node was uncordoned untouched;
`failed`: MIG Manager failed or timed out, the label was restored and the node uncordoned."""

FINAL_PHASES: frozenset[str] = frozenset({"done", "blocked", "failed"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class KindProgress(_Model):
    """One plan kind's progress record: each kind derives its own, `kind` set to the kind."""

    kind: str


class NodeProgress(_Model):
    node: str
    phase: NodePhase = "pending"
    before_mig_config: str | None = None
    before_unschedulable: bool = False
    labeled_at: datetime | None = None
    detail: str | None = None


class ConfigMapProgress(_Model):
    """The mig-parted entries this plan wrote, and what each held before (None: absent)."""

    written: bool = False
    before: dict[str, Any] | None = None


class MigProgress(KindProgress):
    kind: Literal["mig"] = "mig"
    configmap: ConfigMapProgress = Field(default_factory=ConfigMapProgress)
    nodes: list[NodeProgress] = Field(default_factory=list)
    stopped: str | None = None

    def node(self, name: str) -> NodeProgress:
        for item in self.nodes:
            if item.node == name:
                return item
        raise KeyError(name)


class QuotaStep(_Model):
    """One write of one ClusterQueue: its decreases first (phase 1), the rest later (phase 2)."""

    cluster_queue: str
    phase: Literal["decrease", "increase"]
    done: bool = False


class QuotaProgress(KindProgress):
    kind: Literal["quota"] = "quota"
    before: dict[str, list[Any]] = Field(
        default_factory=dict, description="ClusterQueue name → spec.resourceGroups before the first write"
    )
    steps: list[QuotaStep] = Field(default_factory=list)


class Progress(_Model):
    """The whole `plans.progress` document."""

    apply: SerializeAsAny[KindProgress] | None = None
    """The kind's own record (dumped as that model), None before the first step."""

    @classmethod
    def load(cls, raw: Any, record: type[KindProgress]) -> Progress:
        """The stored document, its `apply` read as the kind's `record` model."""
        if not raw:
            return cls()
        data = dict(raw)
        if data.get("apply") is not None:
            data["apply"] = record.model_validate(data["apply"])
        return cls.model_validate(data)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
