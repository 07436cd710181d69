"""What a collection dropped, merged or found missing: one structure, with named reasons.

Everything a run did not load as truth is counted here, so the collect report (and the
freshness views built on it) can say what was left out and why. Every sample read lands in
exactly one place: stored, or counted under exactly one reason (so reads = stored + counted).
Three kinds of entries:

Samples, by (table, field, reason) in `counts`:
- `nan`: NaN or ±Inf values (stored as NULL);
- `negative`: below zero where the quantity cannot be (stored as NULL);
- `out_of_range`: above the physical bound, a ratio over 1, utilization over 100 % (NULL);
- `ha_duplicate`: the same series answered by two replicas of an HA pair (series equal but
  for a replica label, `prom_parse.REPLICA_LABELS`), for DCGM, vLLM and Kueue series alike;
  merged into one series (`prom_parse.merge_replicas`), the copy dropped, so nothing is
  counted twice. These are *merged duplicates*, not bad data; a copy is only this, whatever
  its value;
- `duplicate_series`: two different series describe the same device (or queue, or pod) at
  the same instant (e.g. two pods on one card through one DRA claim); one is kept
  deterministically (an attributed one, then the lowest series id), the others dropped. A
  dropped copy whose value was bad is counted by its value's reason instead (`nan`,
  `negative`, `out_of_range`), never under both;
- `clock_skew`: timestamps off the step grid, outside the requested chunk, or in the future
  relative to the collector's clock (dropped);
- `unattributable`: a series without the `UUID` that identifies its device (dropped).

Series, by (table, reason) in `series`, noted but kept:
- `missing_model_name`: no `modelName` label (old exporters); the GPU's model is `unknown`;
- `missing_node`: neither `Hostname` nor `hostname`; the node is `unknown`
  (`dcgm.UNKNOWN_NODE`);
- `missing_uuid`: no `UUID` label; its samples are counted as `unattributable`.

Gaps, in `gaps`: chunks `[start, end)` in which the engine had no DCGM series at all (an
exporter outage, or a transient empty answer): nothing was loaded for them, the watermark moved
on past them, and later collects read them again within `prometheus.gap_retry_horizon`
(`gpuledger.collect_gaps`, docs/decisions/0182).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

REASONS = ("nan", "negative", "out_of_range", "ha_duplicate", "duplicate_series", "clock_skew",
           "unattributable")
"""Sample reasons (see the module docstring)."""
SERIES_REASONS = ("missing_model_name", "missing_node", "missing_uuid")
"""Series reasons: noted, the series kept (except `missing_uuid`, whose samples are dropped)."""
DROPPED = ("ha_duplicate", "duplicate_series", "clock_skew", "unattributable")
"""Sample reasons whose samples are not stored at all (the others are stored as NULL)."""


@dataclass
class Quality:
    """Counts of bad or merged samples, noted series, and empty chunks (gaps)."""

    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    series: Counter[tuple[str, str]] = field(default_factory=Counter)
    gaps: list[tuple[datetime, datetime]] = field(default_factory=list)

    def add(self, table: str, field_name: str, reason: str, n: int = 1) -> None:
        if n:
            self.counts[(table, field_name, reason)] += int(n)

    def add_series(self, table: str, reason: str, n: int = 1) -> None:
        if n:
            self.series[(table, reason)] += int(n)

    def add_gap(self, start: datetime, end: datetime) -> None:
        self.gaps.append((start, end))

    def add_frame(self, table: str, frame: pl.DataFrame) -> None:
        """Add a frame with columns `field`, `reason`, `n`."""
        for field_name, reason, n in frame.select("field", "reason", "n").iter_rows():
            self.add(table, str(field_name), str(reason), int(n))

    def merge(self, others: Iterable[Quality]) -> Quality:
        for other in others:
            self.counts.update(other.counts)
            self.series.update(other.series)
            self.gaps.extend(other.gaps)
        self.gaps.sort()
        return self

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def merged_duplicates(self) -> int:
        """Samples merged away as HA replica copies (`ha_duplicate`)."""
        return self.by_reason().get("ha_duplicate", 0)

    def by_reason(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, _, reason), n in self.counts.items():
            out[reason] += n
        return dict(out)

    def series_by_reason(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, reason), n in self.series.items():
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

    def lines(self) -> list[str]:
        """The report's lines: samples by reason, noted series, gaps (by chunk)."""
        out = [f"quality: {self.summary()}"]
        out += [f"  {r['table']}.{r['field']}: {r['reason']} {r['count']}" for r in self.rows()]
        if self.series:
            noted = ", ".join(f"{r} {n}" for r, n in sorted(self.series_by_reason().items()))
            out.append(f"series noted: {noted}")
        if self.gaps:
            out.append(f"gaps: {len(self.gaps)} chunk(s) with no DCGM series (watermark moved past; "
                       "read again by later collects within prometheus.gap_retry_horizon)")
            out += [f"  [{a.isoformat()}, {b.isoformat()})" for a, b in self.gaps]
        return out
