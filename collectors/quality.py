"""Bad samples are counted and reported, never loaded as truth.

Reasons:
- `nan`: NaN or ±Inf values;
- `negative`: below zero where the quantity cannot be;
- `out_of_range`: above the physical bound (a ratio over 1, utilization over 100 %, ...);
- `duplicate_series`: two series describe the same device (or queue, or pod) at the same
  instant; one is kept (deterministically), the others counted;
- `clock_skew`: timestamps off the step grid, outside the requested chunk, or in the future
  relative to the collector's clock;
- `unattributable`: a series without the label that identifies its device (e.g. no `UUID`).

A bad value is stored as NULL (the row still shows that the device existed at that instant);
a duplicate or clock-skewed sample is dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

REASONS = ("nan", "negative", "out_of_range", "duplicate_series", "clock_skew", "unattributable")


@dataclass
class Quality:
    """Counts of bad samples by (table, field, reason)."""

    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def add(self, table: str, field_name: str, reason: str, n: int = 1) -> None:
        if n:
            self.counts[(table, field_name, reason)] += int(n)

    def add_frame(self, table: str, frame: pl.DataFrame) -> None:
        """Add a frame with columns `field`, `reason`, `n`."""
        for field_name, reason, n in frame.select("field", "reason", "n").iter_rows():
            self.add(table, str(field_name), str(reason), int(n))

    def merge(self, others: Iterable[Quality]) -> Quality:
        for other in others:
            self.counts.update(other.counts)
        return self

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_reason(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, _, reason), n in self.counts.items():
            out[reason] += n
        return dict(out)

    def rows(self) -> list[dict[str, object]]:
        return [
            {"table": t, "field": f, "reason": r, "count": n}
            for (t, f, r), n in sorted(self.counts.items())
        ]

    def summary(self) -> str:
        if not self.counts:
            return "no bad samples"
        parts = ", ".join(f"{reason} {n}" for reason, n in sorted(self.by_reason().items()))
        return f"{self.total} bad samples ({parts})"
