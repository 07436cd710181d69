"""Plan kinds are registered, not if-chained: one `KindRollout` per kind says how it is applied,
rolled back, reported and exported.

Why: the workflow (approve, apply, resume, roll back, export) is the same for every kind; only
the rollout differs. Each kind's rollout is one module here, `actuator.plan_kinds.<name>`, that
registers itself in `ROLLOUTS` (a `core.registry.Registry`, imported on first use: kubernetes is
heavy), instead of a new branch in every function that looks at `plan.kind` or at the type of
its progress record. The kind's optimizer-stage part (its changes model and how it is shown) is
`optimizer.plan.kinds.<name>`, in that stage's registry (docs/decisions/0154).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import KindProgress, Progress
from gpuledger.core.errors import PlanError
from gpuledger.core.registry import Registry

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import Obj, ObjectRef
    from gpuledger.core.config import Settings
    from gpuledger.optimizer.plan.contract import Plan


@dataclass(frozen=True)
class StepOutcome:
    """One node (MIG) or one ClusterQueue write (quota) and where it ended."""

    object: str
    state: str
    detail: str | None = None


@dataclass(frozen=True)
class RollbackOutcome:
    """What a rollback reached: one outcome per object, and what is not back yet (empty: all)."""

    steps: tuple[StepOutcome, ...] = ()
    problems: tuple[str, ...] = ()


class KindRollout(Protocol):
    """How one plan kind is rolled out; every method works on the shared progress record."""

    kind: str

    @property
    def progress(self) -> type[KindProgress]:
        """The model of the kind's progress record (`Progress.apply`)."""

    def apply(self, ctx: RolloutContext) -> None:
        """Run (or resume) the rollout, checkpointing `ctx.progress` after each step."""

    def rollback(self, ctx: RolloutContext, applied: Progress) -> RollbackOutcome:
        """Restore the before-states recorded in `applied`."""

    def steps(self, progress: Progress) -> tuple[StepOutcome, ...]:
        """Where each object of the rollout stands, for the result shown to the user."""

    def problems(self, progress: Progress) -> list[str]:
        """Why the rollout is not complete (empty: every change applied and verified)."""

    def retry_failed(self, progress: Progress) -> None:
        """Prepare a failed rollout's record so that applying again retries what failed."""

    def manifests(self, plan: Plan, settings: Settings) -> list[tuple[ObjectRef, Obj]]:
        """The fields gpuledger owns of each object the plan writes, in a stable order, for
        `plans export` (`actuator.export` adds apiVersion, kind and name)."""


ROLLOUTS: Registry[KindRollout] = Registry(
    "plan kind", error=PlanError, missing="no rollout", package=__name__)
"""Every plan kind's rollout: `actuator.plan_kinds.<kind>` registers itself."""


def rollout_for(kind: str) -> KindRollout:
    """The registered rollout of `kind` (PlanError for a kind nobody registered)."""
    return ROLLOUTS.get(kind)
