"""Split a collection window into query chunks that Prometheus can answer in one go.

Rules (why each matters):
1. Chunk edges sit on multiples of the step since the epoch, so every chunk evaluates the same
   sample grid and two runs over overlapping windows produce identical timestamps.
2. A chunk holds at most `max_points` evaluation points per series (Prometheus refuses a range
   query above 11,000 points) and never more than `size` (the load batch, one transaction).
3. Chunks are half-open `[start, end)`: the range query asks for `start .. end - step`
   inclusive, so the instant `end` belongs to the next chunk only and no sample is fetched
   twice at a boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuledger.core.errors import InputError
from gpuledger.core.window import Window, floor_time


@dataclass(frozen=True, slots=True)
class Chunk:
    """One range query's time span: points `start, start+step, ..., end-step`."""

    window: Window

    @property
    def start(self) -> datetime:
        return self.window.start

    @property
    def end(self) -> datetime:
        return self.window.end

    @property
    def step(self) -> timedelta:
        return self.window.step

    @property
    def last_point(self) -> datetime:
        """The inclusive `end` to send to `/api/v1/query_range`."""
        return self.window.end - self.window.step

    @property
    def points(self) -> int:
        return int((self.window.end - self.window.start) / self.window.step)


def plan_chunks(window: Window, size: timedelta, max_points: int = 11_000) -> Iterator[Chunk]:
    """Aligned, end-exclusive chunks covering `window` (itself aligned outward to the step)."""
    step = window.step
    if max_points < 1:
        raise InputError(f"max points per query {max_points}: must be at least 1")
    if size < step:
        raise InputError(f"chunk size {size} is shorter than the step {step}")
    aligned = window.aligned()
    # The chunk length is a whole number of steps, capped by the point limit.
    steps_per_chunk = min(int(size / step), max_points)
    length = steps_per_chunk * step
    cursor = aligned.start
    while cursor < aligned.end:
        # Chunk edges are multiples of `length` since the epoch when `length` divides a day, so
        # daily chunks line up with UTC days (the warehouse's partitions).
        boundary = floor_time(cursor, length) + length
        upper = min(boundary, aligned.end, cursor + length)
        yield Chunk(Window(cursor, upper, step))
        cursor = upper
