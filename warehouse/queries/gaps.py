"""Read queries for sample holes: spans of the step grid where no GPU sample at all was loaded.

Why: a collect whose engine answered empty (an exporter outage, or a transient empty answer of
a query frontend) loads nothing for those chunks and moves the watermark past them, so the
watermark alone cannot tell a window read from a window lost. The samples can: a span of the
grid with no `gpu_samples` row on any card is a hole, whatever its cause, and the collector
reads it again on later rounds (`gpuledger.collect_gaps`) until data arrives or the retry
horizon passes. Deriving holes from the samples (not from a list of recorded gaps) means a
hole is closed exactly when rows fill it, by any run, and a hole left by a run killed between
its chunks is found the same way.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.core.window import as_utc

if TYPE_CHECKING:
    from gpuledger.warehouse.protocols import ReadableWarehouse

_HOLES_SQL = """
WITH seen AS (
    SELECT DISTINCT ts FROM gpu_samples WHERE ts >= $lo AND ts < $hi
), edges AS (
    SELECT $lo - $step AS ts UNION ALL SELECT ts FROM seen UNION ALL SELECT $hi AS ts
), pairs AS (
    SELECT lag(ts) OVER (ORDER BY ts) AS before, ts AS after FROM edges
)
SELECT before + $step AS start_ts, after AS end_ts FROM pairs
WHERE before IS NOT NULL AND after - (before + $step) >= $shortest
ORDER BY start_ts
"""


def sample_holes(
    wh: ReadableWarehouse, lo: datetime, hi: datetime, step: timedelta, shortest: timedelta,
) -> list[tuple[datetime, datetime]]:
    """Spans `[start, end)` within `[lo, hi)` (both on the step grid) in which no GPU sample was
    loaded, at least `shortest` long: shorter ones are scrape spacing, not a lost read."""
    if lo >= hi:
        return []
    frame = wh.query(_HOLES_SQL, {"lo": lo, "hi": hi, "step": step, "shortest": shortest})
    return [(as_utc(a), as_utc(b)) for a, b in frame.iter_rows()]


def first_sample(wh: ReadableWarehouse) -> datetime | None:
    """The oldest GPU sample kept (retention prunes older ones): holes are looked for only from
    here on, so a pruned month is not taken for a lost one."""
    value = wh.scalar("SELECT min(ts) FROM gpu_samples")
    return as_utc(value) if value is not None else None
