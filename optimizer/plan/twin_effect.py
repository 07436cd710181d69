"""A plan's effect as measured on the scheduling twin, stored beside the plan (issue 36 step 2).

Why its own record, not a field of the frozen `Plan`: a plan is what a human approves, frozen
and compared body for body (`optimizer.plan.store.save_plan`); the twin measures it later, maybe
several times, and a measurement must never change what was approved. So the store keeps the
latest `TwinEffect` in its own column of the plan's row (`optimizer.plan.store.attach_twin_effect`,
schema v017) and `plans show` and the Plans page put it beside the model's backtest.

What is in it is plain figures and labels: the product knows nothing of the twin's binaries. A
measurement is a recorded window replayed twice, under the plan's `old_*` quotas and under its
`new_*` ones, on the real admission controller and scheduler (who: `measured_by`, `versions`);
each run's demand is also replayed through the product's own quota model, so the model's figure
for the same window stands beside the twin's (`TwinTeam.model_*`). Pending is in minutes of the
resource (GPU-minutes; instance-minutes for a MIG profile), as the plan's own effect.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

TWIN_EFFECT_SCHEMA = 1
"""The version of `TwinEffect`'s JSON form; a reader refuses a newer one by validation."""

WHOLE_GPU = "nvidia.com/gpu"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TwinTeam(_Frozen):
    """One team's (ClusterQueue's) pending minutes of one resource over the window."""

    team: str
    resource: str = WHOLE_GPU
    twin_before: float
    """Under the plan's old quotas, on the twin (sampled each simulated minute)."""
    twin_after: float
    model_before: float
    """The product's quota model fed the same run's demand, old quotas."""
    model_after: float


class TwinEffect(_Frozen):
    """One measurement of a plan on the twin (module docstring)."""

    schema_version: Literal[1] = 1
    plan_id: str
    plan_fingerprint: str
    """The fingerprint of the plan measured: the store refuses the record for another plan body."""
    measured_by: str
    """What ran admission and scheduling, e.g. "kube-scheduler + Kueue v0.17.0 on KWOK"."""
    versions: dict[str, str] = Field(default_factory=dict)
    source_commit: str = ""
    """The commit of the code that cut and replayed the window ("" when not known)."""
    window_start: AwareDatetime
    window_end: AwareDatetime
    seconds_per_minute: float
    """Wall seconds per simulated minute (the compressed clock)."""
    borrowing: bool = False
    """False: cohorts removed, each queue alone (the backtest's "under contention (no borrowing)")."""
    workloads: int = 0
    skipped: int = 0
    """Pods of the window the twin could not replay (not a whole number of one quota resource)."""
    finished: tuple[bool, bool] = (True, True)
    """Whether every workload finished in the before and after runs."""
    teams: tuple[TwinTeam, ...] = ()
    measured_at: AwareDatetime
    note: str = ""

    def total(self, field: Literal["twin_before", "twin_after", "model_before", "model_after"]) -> float:
        """The whole-GPU minutes of `field` over every team (MIG instance-minutes are another unit)."""
        return sum(getattr(t, field) for t in self.teams if t.resource == WHOLE_GPU)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> TwinEffect:
        return cls.model_validate_json(text)
