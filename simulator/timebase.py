"""The simulator's clock: integer steps since the window start.

Everything inside the simulator (pod lifetimes, MIG epochs, samples) lives on one grid of
`step` seconds, so a sample at step k stands for `[k, k+1)` and card-hours computed from
intervals equal card-hours counted from samples. Only the edges convert to datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.core.errors import InputError
from gpuledger.core.window import Window

if TYPE_CHECKING:
    import numpy as np

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def expand_steps(ids: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id, step) pairs for each id's steps `[lo, hi)`, id-major (a series' lines contiguous)."""
    import numpy as np

    counts = np.maximum(hi - lo, 0)
    rep = np.repeat(ids, counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return rep, np.repeat(lo, counts) + offsets


@dataclass(frozen=True, slots=True)
class Timebase:
    origin_s: int
    """Window start, seconds since the epoch."""
    step_s: int
    steps: int
    """Number of steps in the window."""

    @classmethod
    def of(cls, window: Window) -> Timebase:
        step_s = window.step.total_seconds()
        if step_s != int(step_s) or 3600 % int(step_s):
            raise InputError(f"simulation step {window.step}: must be whole seconds dividing one hour")
        start_s = (window.start - EPOCH).total_seconds()
        end_s = (window.end - EPOCH).total_seconds()
        if start_s % step_s or end_s % step_s:
            raise InputError(f"simulation window {window}: start and end must be multiples of the step")
        return cls(int(start_s), int(step_s), int((end_s - start_s) // step_s))

    @property
    def steps_per_hour(self) -> int:
        return 3600 // self.step_s

    def at(self, k: int) -> datetime:
        return EPOCH + timedelta(seconds=self.origin_s + k * self.step_s)

    def index(self, moment: datetime) -> int:
        """The step containing `moment` (may be outside `[0, steps)`)."""
        return int(((moment - EPOCH).total_seconds() - self.origin_s) // self.step_s)

    def hours_to_steps(self, hours: float) -> int:
        return max(1, round(hours * 3600 / self.step_s))
