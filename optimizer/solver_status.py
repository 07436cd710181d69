"""What a solver run must reach before its plan may be shown or stored (one rule, MIG and quota).

A lexicographic model runs its stages in order; each stage either reaches FEASIBLE or OPTIMAL
(a solution that meets every constraint, proven best or not) or it does not: INFEASIBLE (the
limits cannot all hold, e.g. at most -1 GPUs changed), MODEL_INVALID, UNKNOWN (the time ran out
before any solution) or NOT_RUN (no time was left for it). Keeping the previous stage's solution
and calling the plan "FEASIBLE ... already optimal" was a lie the user could approve, so any
stage short of FEASIBLE fails the command with its status and nothing is stored.
"""

from __future__ import annotations

import math

from gpuledger.core.errors import InputError, SolverError

REACHED = ("OPTIMAL", "FEASIBLE")
MAX_WORKERS = 64


def require_reached(model: str, stage: str, status: str, time_limit_s: float) -> None:
    """Raise `SolverError` naming the stage and its status unless it reached a solution."""
    if status in REACHED:
        return
    if status == "INFEASIBLE":
        why = "its constraints cannot all hold (check the change limits and guaranteed minimums)"
    elif status in ("UNKNOWN", "NOT_RUN"):
        why = f"the time limit of {time_limit_s:g} s ran out first (raise --time-limit)"
    else:
        why = "the solver rejected the model"
    raise SolverError(f"{model} model: stage {stage} ended {status}: {why}; no plan was made")


def check_solver_limits(time_limit_s: float, workers: int) -> None:
    """Refuse limits no solver run can honour (NaN, negative, zero)."""
    if not isinstance(time_limit_s, int | float) or not 0 < time_limit_s < math.inf:
        raise InputError(f"time limit {time_limit_s!r}: expected a positive number of seconds")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"workers {workers!r}: expected an integer from 1 to {MAX_WORKERS}")


def check_change_limit(value: int | None, what: str) -> None:
    """A limit on GPUs changed is a count: absent, or a non-negative integer."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{what} {value!r}: expected a non-negative integer")
