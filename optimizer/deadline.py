"""The wall-clock bound of a solver command: reading the inputs and solving share one limit.

`--time-limit` used to reach only CP-SAT, so a command spent minutes reading a large fleet file
before the solver's clock even started. `command_deadline` starts the clock when the command
starts; the solver gets what is left (less a reserve for measuring the plan), and on the main
thread an interval timer stops pure-Python work that runs past the bound with one
`TimeLimitError` line. DuckDB stops its query at the signal (its interruption becomes the same
line); CP-SAT finishes its call, bounded by its own budget.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from gpuledger.core.errors import TimeLimitError

RESERVE = 0.2
"""Share of the limit kept back from the solver for assigning and measuring the plan."""
MIN_SOLVER_S = 0.05


class Deadline:
    """A monotonic deadline `limit_s` seconds after creation."""

    def __init__(self, limit_s: float, what: str) -> None:
        self.limit_s = limit_s
        self.what = what
        self.started = time.monotonic()

    def remaining(self) -> float:
        return self.limit_s - (time.monotonic() - self.started)

    def exceeded(self, during: str) -> TimeLimitError:
        return TimeLimitError(
            f"{self.what}: ran past its time limit of {self.limit_s:g} s while {during} "
            "(raise --time-limit or plans.solver_time_limit_s)"
        )

    def solver_budget(self) -> float:
        """Seconds the solver may use now: what is left less the reserve; refused when that is
        too little for a solver to start."""
        budget = self.remaining() - RESERVE * self.limit_s
        if budget < MIN_SOLVER_S:
            raise self.exceeded("reading the inputs")
        return budget


@contextmanager
def command_deadline(limit_s: float, what: str) -> Iterator[Deadline]:
    """A `Deadline`, enforced by SIGALRM where the platform and the thread allow it."""
    deadline = Deadline(limit_s, what)
    armed = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not armed:
        yield deadline
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise deadline.exceeded("reading the inputs or planning")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        yield deadline
    except RuntimeError as exc:
        # DuckDB runs the Python signal handler between its own steps and, when it raises,
        # stops the query with a bare `RuntimeError('Query interrupted')` that drops our error.
        if deadline.remaining() <= 0 and "interrupted" in str(exc).lower():
            raise deadline.exceeded("reading the inputs") from None
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
