"""Retention: raw GPU samples age out once the hourly roll-up holds them (docs/decisions/0071).

Raw samples are about 80 % of the rows and of the file; everything a bill, a report or a page
of an old period reads (`card_hours_hourly`, `allocations`, the inventory) is kept. Rules:

1. Only hours the roll-up covers go: from the roll-up's first hour to its watermark. Samples
   that were never rolled up are kept, however old (removing them would lose money).
2. A margin before the first kept hour stays (`margin`: the context the sample pass reads on
   each side of a window), so rolling up the oldest kept day again gives the same numbers.
3. One transaction, with the mark `retention.removed_before` (file marker table
   `gpuledger_meta`: raw samples before it were removed; not a watermark, which `status` would
   list as a source) moved in it: a crash leaves either all or none of it, and re-running removes
   nothing more. A checkpoint afterwards hands the freed blocks back to the file.
4. Whatever else keeps no raw samples of rolled-up hours (the serving store) writes the same
   mark (`mark_removed`): a bill then never takes those hours for ones it could recompute from
   raw samples (docs/decisions/0147).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpuledger.core.window import HOUR, as_utc, floor_time
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.sample_fingerprints import SAMPLES, kept_current
from gpuledger.warehouse.sample_layout import VALUES_TABLE, prune_series_sql
from gpuledger.warehouse.store import Warehouse

RAW_TABLE = "gpu_samples"
"""What readers count raw samples in (a view since v8); rows are removed from `VALUES_TABLE`
and series no sample refers to any more from `gpu_series`."""
RETENTION_KEY = "retention.removed_before"
"""`gpuledger_meta` key: raw samples before this instant were removed (hours live on as roll-ups)."""


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """What one compaction did; `removed_before` is None when nothing could go."""

    removed_rows: int
    removed_before: datetime | None
    kept_rows: int
    used_bytes_before: int
    used_bytes_after: int
    reason: str


def used_bytes(wh: Warehouse) -> int:
    """Bytes of the file's blocks in use (a file never shrinks; freed blocks are reused)."""
    rows = wh.con.sql("SELECT used_blocks * block_size FROM pragma_database_size()").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def removed_before(wh: ReadableWarehouse) -> datetime | None:
    """The instant before which raw samples were removed, or None when never compacted."""
    value = wh.scalar("SELECT value FROM gpuledger_meta WHERE key = ?", [RETENTION_KEY])
    return as_utc(datetime.fromisoformat(str(value))) if value is not None else None


def removable_until(
    wh: Warehouse, keep_from: datetime, margin: timedelta, rollup_source: str,
) -> tuple[datetime | None, datetime | None, str]:
    """`(start, end, reason)`: the hours whose raw samples may go (rules 1 and 2), or Nones
    and why nothing may."""
    watermark = wh.watermark(rollup_source)
    first = wh.scalar("SELECT min(ts) FROM card_hours_hourly")
    if watermark is None or first is None:
        return None, None, "no hourly roll-up yet: nothing is removed before it is rolled up"
    start = floor_time(as_utc(first), HOUR)
    end = floor_time(min(as_utc(keep_from), watermark) - margin, HOUR)
    if end <= start:
        return None, None, (
            f"no rolled-up hour before {end.isoformat()}, where the kept raw window (and its margin) "
            "begins: nothing to remove"
        )
    return start, end, f"raw samples of [{start.isoformat()}, {end.isoformat()}) are in the roll-up"


def compact(
    wh: Warehouse, keep_from: datetime, *, margin: timedelta, rollup_source: str,
) -> CompactionStats:
    """Remove the raw samples of rolled-up hours before `keep_from - margin` (rules above)."""
    before = used_bytes(wh)
    start, end, reason = removable_until(wh, keep_from, margin, rollup_source)
    removed = 0
    if start is not None and end is not None:
        with wh.transaction(), kept_current(wh.con, SAMPLES, start, end):
            rows = wh.execute(
                f"DELETE FROM {VALUES_TABLE} WHERE ts >= ? AND ts < ?", [start, end]
            )
            removed = int(rows[0][0]) if rows else 0
            wh.execute(prune_series_sql())
            mark_removed(wh.con, end)
        wh.con.execute("CHECKPOINT")
    kept = wh.count(RAW_TABLE)
    return CompactionStats(removed, end, kept, before, used_bytes(wh), reason)


def mark_removed(con: Any, end: datetime | None, *, catalog: str | None = None) -> None:
    """Record (rule 3) that raw samples before `end` are gone, in `catalog`'s marker table (the
    open one by default), unless it already says so of a later instant; `end` None: nothing."""
    if end is None:
        return
    table = f"{catalog}.gpuledger_meta" if catalog else "gpuledger_meta"
    rows = con.execute(f"SELECT value FROM {table} WHERE key = ?", [RETENTION_KEY]).fetchall()
    if rows and as_utc(datetime.fromisoformat(str(rows[0][0]))) >= end:
        return
    con.execute(f"DELETE FROM {table} WHERE key = ?", [RETENTION_KEY])  # a copied table has no key
    con.execute(f"INSERT INTO {table} VALUES (?, ?)", [RETENTION_KEY, end.isoformat()])
