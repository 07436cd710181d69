"""A plan's lifecycle: its statuses and the one table of allowed moves between them.

Why on its own: the optimizer's store, the actuator's approval policy and the CLI all reason
about the same statuses; none of them needs the plan's body types or the store to do so.

    proposed → approved → applying → applied → rolled_back
        │          │          ├─→ failed → applying (resume) | rolled_back
        │          │          └─→ rolled_back
        ├─→ superseded (a newer proposal for the same observed state)
        └──────────┴─→ rejected | expired | stale
"""

from __future__ import annotations

from typing import Literal

from gpuledger.core.errors import PlanError

PlanStatus = Literal[
    "proposed", "approved", "applying", "applied", "failed", "rolled_back",
    "rejected", "expired", "stale", "superseded",
]
STATUSES: tuple[PlanStatus, ...] = (
    "proposed", "approved", "applying", "applied", "failed", "rolled_back",
    "rejected", "expired", "stale", "superseded",
)

TRANSITIONS: dict[PlanStatus, frozenset[PlanStatus]] = {
    "proposed": frozenset({"approved", "rejected", "expired", "stale", "superseded"}),
    "approved": frozenset({"applying", "rejected", "expired", "stale"}),
    # applying → applying records progress (resumable apply)
    "applying": frozenset({"applying", "applied", "failed", "rolled_back"}),
    "failed": frozenset({"applying", "rolled_back"}),
    "applied": frozenset({"rolled_back"}),
    "rolled_back": frozenset(),
    "rejected": frozenset(),
    "expired": frozenset(),
    "stale": frozenset(),
    "superseded": frozenset(),
}
"""Allowed status moves: `TRANSITIONS[current]` is the set of statuses it may move to."""

TERMINAL: frozenset[PlanStatus] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
EXPIRABLE: frozenset[PlanStatus] = frozenset({"proposed", "approved"})


def check_status(status: str) -> None:
    """Raise `PlanError` unless `status` is one of `STATUSES`."""
    if status not in TRANSITIONS:
        raise PlanError(f"plan status {status!r} is unknown (known: {', '.join(STATUSES)})")


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
