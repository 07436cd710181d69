"""Plan kinds are registered, not if-chained: one `KindRollout` per kind says how it is applied,
rolled back and reported.

Why: the workflow (approve, apply, resume, roll back) is the same for every kind; only the
rollout differs. A new kind (e.g. an autoscaling plan) is one new module with one `ROLLOUT`
object, listed once in `BUILTIN_KINDS`, instead of a new branch in every function that looks at
`plan.kind` or at the type of its progress record.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from gpuledger.actuator.rollout_context import RolloutContext
from gpuledger.actuator.rollout_progress import Progress
from gpuledger.core.errors import PlanError

BUILTIN_KINDS: dict[str, str] = {
    "mig": "gpuledger.actuator.mig_kind",
    "quota": "gpuledger.actuator.quota_kind",
}
"""Plan kind → the module whose `ROLLOUT` handles it (imported on first use: kubernetes is heavy)."""


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


_LOADED: dict[str, KindRollout] = {}


def rollout_for(kind: str) -> KindRollout:
    """The registered rollout of `kind` (PlanError for a kind nobody registered)."""
    if kind not in _LOADED:
        module = BUILTIN_KINDS.get(kind)
        if module is None:
            known = ", ".join(sorted(BUILTIN_KINDS))
            raise PlanError(f"plan kind {kind!r} has no rollout (known: {known})")
        rollout: KindRollout = importlib.import_module(module).ROLLOUT
        if rollout.kind != kind:
            raise PlanError(f"{module}.ROLLOUT handles {rollout.kind!r}, registered for {kind!r}")
        _LOADED[kind] = rollout
    return _LOADED[kind]
