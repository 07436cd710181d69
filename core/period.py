"""The billing period: one calendar month in UTC, as a value.

Every command, page and report names a month as `YYYY-MM` (or `last`); the arithmetic on it
(which month is "last", the month before, its window) lives only here, because each copy of
it used to roll the year or pick "last" slightly differently, moving a bill between months.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gpuledger.core.errors import InputError
from gpuledger.core.window import Window, as_utc

_MONTH = re.compile(r"(\d{4})-(\d{2})")
_LAST = ("last", "previous")


@dataclass(frozen=True, order=True, slots=True)
class Period:
    """A calendar month in UTC; ordered by time, hashable, `str()` is `YYYY-MM`."""

    year: int
    month: int

    def __post_init__(self) -> None:
        if not 1 <= self.month <= 12 or not 1 <= self.year <= 9999:
            raise InputError(f"period {self.year:04d}-{self.month:02d}: expected YYYY-MM, e.g. 2026-11")

    @classmethod
    def parse(cls, text: str, *, now: datetime | None = None) -> Period:
        """`YYYY-MM`, or `last` (the last complete month before `now`, default the clock)."""
        if text.strip().lower() in _LAST:
            if now is None:
                from gpuledger.core.config import utcnow

                now = utcnow()
            return cls.last_complete(now)
        return cls.exact(text)

    @classmethod
    def exact(cls, text: str) -> Period:
        """`YYYY-MM` only: for flags and keys that name a month literally (no `last`)."""
        match = _MONTH.fullmatch(text.strip())
        if not match or not 1 <= int(match.group(2)) <= 12:
            raise InputError(f"period {text!r}: expected YYYY-MM, e.g. 2026-11")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def of(cls, moment: datetime) -> Period:
        """The month `moment` (timezone-aware) falls in, in UTC."""
        utc = as_utc(moment)
        return cls(utc.year, utc.month)

    @classmethod
    def last_complete(cls, now: datetime) -> Period:
        """The month before the one `now` falls in: the newest month that is over."""
        return cls.of(now).shift(-1)

    @classmethod
    def newest_first(cls, first: datetime, last: datetime) -> list[Period]:
        """The months from `last`'s back to `first`'s, newest first (pickers, month results)."""
        newest, oldest = cls.of(last), cls.of(first)
        count = (newest.year - oldest.year) * 12 + newest.month - oldest.month + 1
        return [newest.shift(-i) for i in range(max(count, 0))]

    def shift(self, n: int) -> Period:
        """The month `n` months later (earlier when negative)."""
        index = self.year * 12 + (self.month - 1) + n
        return Period(index // 12, index % 12 + 1)

    @property
    def start(self) -> datetime:
        """Midnight UTC on the 1st (inclusive)."""
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """Midnight UTC on the 1st of the next month (exclusive)."""
        return self.shift(1).start

    @property
    def window(self) -> Window:
        """The month as a one-minute `Window`."""
        return self.window_at(timedelta(minutes=1))

    def window_at(self, step: timedelta) -> Window:
        """The month as a `Window` at another resolution."""
        return Window(self.start, self.end, step)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"
