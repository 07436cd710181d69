"""Half-open UTC time windows `[start, end)` with an explicit resolution.

Every query, load and bill in gpuledger is scoped by a `Window`. Timestamps are always
timezone-aware UTC; naive datetimes are refused rather than guessed, because a silent local
time shift moves card-hours between billing periods.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from gpuledger.core.errors import InputError

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def parse_duration(text: str) -> timedelta:
    """Parse a Prometheus-style duration (`60s`, `5m`, `1h`, `1d`)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise InputError(f"duration {text!r}: expected a number and a unit (ms, s, m, h, d, w)")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise InputError(f"duration {text!r}: must be positive")
    return timedelta(seconds=seconds)


def parse_instant(text: str) -> datetime:
    """Parse an ISO-8601 instant; a bare date means midnight UTC; an offset is required otherwise."""
    raw = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
            return datetime.combine(date.fromisoformat(raw), datetime.min.time(), tzinfo=UTC)
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"time {text!r}: expected ISO-8601, e.g. 2026-11-01T00:00:00Z") from None
    if parsed.tzinfo is None:
        raise InputError(f"time {text!r}: add a UTC offset (e.g. 'Z'); naive times are ambiguous")
    return parsed.astimezone(UTC)


def as_utc(moment: datetime) -> datetime:
    """Return `moment` in UTC, refusing naive datetimes."""
    if moment.tzinfo is None:
        raise InputError(f"time {moment.isoformat()}: naive datetime, expected timezone-aware UTC")
    return moment.astimezone(UTC)


def floor_time(moment: datetime, step: timedelta) -> datetime:
    """Floor `moment` to a multiple of `step` since the Unix epoch."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    steps = (as_utc(moment) - epoch) // step
    return epoch + steps * step


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open interval `[start, end)` in UTC, with the resolution data is wanted at."""

    start: datetime
    end: datetime
    step: timedelta = timedelta(minutes=1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", as_utc(self.start))
        object.__setattr__(self, "end", as_utc(self.end))
        if self.end <= self.start:
            raise InputError(
                f"window {self.start.isoformat()} .. {self.end.isoformat()}: end must be after start"
            )
        if self.step <= timedelta(0):
            raise InputError(f"window step {self.step}: must be positive")

    @classmethod
    def parse(cls, start: str, end: str, step: str = "60s") -> Window:
        return cls(parse_instant(start), parse_instant(end), parse_duration(step))

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    @property
    def hours(self) -> float:
        return self.duration.total_seconds() / 3600

    def contains(self, moment: datetime) -> bool:
        return self.start <= as_utc(moment) < self.end

    def overlaps(self, other: Window) -> bool:
        return self.start < other.end and other.start < self.end

    def clip(self, other: Window) -> Window | None:
        """The intersection of two windows, or None when they do not overlap."""
        start, end = max(self.start, other.start), min(self.end, other.end)
        return Window(start, end, self.step) if start < end else None

    def split(self, size: timedelta) -> Iterator[Window]:
        """Consecutive sub-windows of at most `size`, aligned to multiples of `size` since the epoch."""
        cursor = self.start
        while cursor < self.end:
            boundary = floor_time(cursor, size) + size
            upper = min(boundary, self.end)
            yield Window(cursor, upper, self.step)
            cursor = upper

    def days(self) -> Iterator[Window]:
        """The UTC calendar days (clipped) the window touches; the warehouse partitions by these."""
        return self.split(DAY)

    def aligned(self) -> Window:
        """The window with start floored and end ceiled to the step (so sample grids line up)."""
        start = floor_time(self.start, self.step)
        end = floor_time(self.end, self.step)
        if end < self.end:
            end += self.step
        return Window(start, end, self.step)

    def __str__(self) -> str:
        return f"[{self.start.isoformat()}, {self.end.isoformat()}) step {self.step}"
