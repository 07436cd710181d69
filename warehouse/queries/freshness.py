"""Read queries for freshness: how new the newest sample is, per source and overall.

Why here: a watermark says how far a collector *asked*, not what it *got*: a collector whose
exporter died keeps moving its watermark over windows that hold no rows, so a bill, a page or a
report that showed only the watermark (or when a snapshot was copied) would look fresh while the
data stopped. Every bill, page and report therefore states the newest *sample* time, read here,
and `gpuledger status` shows both side by side with the gap between them.

Raw samples are kept for a recent window only; older months live as the hourly roll-up. So the
newest sample falls back to the roll-up's newest hour *end* (hour start + 1 h) when no raw sample
is left, which is what a bill of a compacted month was computed from. Tables a store does not
have (a serving store without raw samples) count as empty rather than failing the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.core.window import as_utc
from gpuledger.warehouse.sample_fingerprints import SAMPLES
from gpuledger.warehouse.sample_layout import SAMPLES_VIEW, VALUES_TABLE

if TYPE_CHECKING:
    from gpuledger.warehouse.protocols import ReadableWarehouse

SAMPLE_TABLES: tuple[str, ...] = ("gpu_samples", "token_samples", "queue_samples")
"""Tables of raw samples, each with a `ts` per sample."""
ROLLUP_TABLE = "card_hours_hourly"
"""The hourly roll-up: its `ts` is an hour start, so its newest data ends one hour later."""
ROLLUP_HOUR = timedelta(hours=1)
COLLECTION_INTERVAL = timedelta(minutes=15)
"""How often collection runs when nothing says otherwise: the collection CronJob's schedule
(`deploy/cronjob-collect.yaml`, every 15 minutes). The settings have no collection-interval key,
and `prometheus.step` is the sample grid, not how often a collector runs, so it is not used."""
STALE_INTERVALS = 2
"""Data is stale when the newest sample is older than this many collection intervals: one
missed run is normal (a run may still be loading); two mean collection has stopped."""
SIMULATOR_SOURCE = "simulator"
"""The watermark source `gpuledger simulate --load` and `gpuledger demo` record with the
simulated samples they load (`pipeline.load_simulation`)."""


@dataclass(frozen=True, slots=True)
class SourceFreshness:
    """One source's freshness.

    `source` is a watermark source (`prometheus.gpu_samples`, `kubernetes`, `card_hours_hourly`)
    or, for a sample table no watermark names, the table itself. `watermark` is where its
    collector will resume (None when no watermark is stored); `newest_sample` the newest row it
    loaded (None when its table is empty or it feeds no sample table, as `kubernetes`); `gap` is
    `watermark - newest_sample`: how far the collector moved past its last data (None when either
    is missing). A gap of more than a step or two means the collector runs but gets no data.
    """

    source: str
    watermark: datetime | None
    newest_sample: datetime | None
    gap: timedelta | None


def is_stale(newest: datetime | None, now: datetime, interval: timedelta = COLLECTION_INTERVAL) -> bool:
    """True when there is no sample at all or the newest is older than two intervals."""
    return newest is None or as_utc(now) - as_utc(newest) > STALE_INTERVALS * interval


def describe_age(age: timedelta) -> str:
    """A short human age: `3 d 4 h`, `2 h 5 min`, `12 min`, `40 s`."""
    seconds = max(int(age.total_seconds()), 0)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{secs} s"


def _tables(wh: ReadableWarehouse) -> set[str]:
    frame = wh.query("SELECT table_name FROM information_schema.tables")
    return {str(name) for (name,) in frame.iter_rows()}


def fingerprints_kept(wh: ReadableWarehouse) -> bool:
    """Whether `wh`'s catalog keeps the samples' fingerprints (v018,
    `warehouse.sample_fingerprints`; a catalog not migrated, or a serving store, has none)."""
    return bool(wh.scalar("SELECT count(*) FROM information_schema.tables WHERE table_catalog = "
                          "current_database() AND table_schema = 'main' AND table_name = ?", [SAMPLES.table]))


def _samples_table(tables: set[str]) -> str:
    """Where the GPU samples' newest time is read: their values table where they are stored as
    series and values (v008, `warehouse.sample_layout`). Every value row has its series, and
    through the view DuckDB joined each row to it for nothing (0.12-0.31 s at 1,000 GPUs × 31
    days against 2 ms from the values' statistics). `tables`: the catalog the caller read."""
    return VALUES_TABLE if VALUES_TABLE in tables else SAMPLES_VIEW


def _newest_ts(wh: ReadableWarehouse, table: str, before: datetime | None) -> datetime | None:
    """Newest `ts` of `table` (strictly before `before` when given). `table` is one of the
    module's constants, never a caller's string."""
    if before is None:
        value = wh.scalar(f"SELECT max(ts) FROM {table}")
    else:
        value = wh.scalar(f"SELECT max(ts) FROM {table} WHERE ts < ?", [as_utc(before)])
    return as_utc(value) if value is not None else None


def newest_ts(wh: ReadableWarehouse, table: str) -> datetime | None:
    """The newest `ts` of one of `SAMPLE_TABLES` or the roll-up (no fallback: the table's own
    newest row), or None when it is empty."""
    if table not in (*SAMPLE_TABLES, ROLLUP_TABLE):
        raise ValueError(f"newest_ts: {table!r} is not a sample table")
    return _newest_ts(wh, _samples_table(_tables(wh)) if table == SAMPLES_VIEW else table, None)


def _rollup_end(wh: ReadableWarehouse, before: datetime | None) -> datetime | None:
    """The end of the roll-up's newest hour (clamped to `before`: an hour that starts before it
    covers data up to it, no further)."""
    start = _newest_ts(wh, ROLLUP_TABLE, before)
    if start is None:
        return None
    end = start + ROLLUP_HOUR
    return min(end, as_utc(before)) if before is not None else end


def newest_sample(wh: ReadableWarehouse, *, before: datetime | None = None) -> datetime | None:
    """The newest GPU sample time (strictly before `before` when given, e.g. a period's end), or
    the roll-up's newest hour end when no raw sample is left there; None for an empty store."""
    return _newest_sample(wh, _tables(wh), before)


def _newest_sample(wh: ReadableWarehouse, tables: set[str], before: datetime | None) -> datetime | None:
    """`newest_sample` in the catalog `tables` the caller read."""
    if SAMPLES_VIEW in tables:
        newest = _newest_ts(wh, _samples_table(tables), before)
        if newest is not None:
            return newest
    return _rollup_end(wh, before) if ROLLUP_TABLE in tables else None


def _table_of(source: str) -> str | None:
    """The table a watermark source loads: `prometheus.gpu_samples` → `gpu_samples`,
    `card_hours_hourly` → itself; None for sources without one (`kubernetes` inventory)."""
    table = source.rsplit(".", 1)[-1]
    return table if table in (*SAMPLE_TABLES, ROLLUP_TABLE) else None


def _newest_of(wh: ReadableWarehouse, table: str | None, tables: set[str]) -> datetime | None:
    """Newest data of `table`; GPU samples fall back to the roll-up as `newest_sample` does."""
    if table == SAMPLES_VIEW:
        return _newest_sample(wh, tables, None)
    if table is None or table not in tables:
        return None
    return _rollup_end(wh, None) if table == ROLLUP_TABLE else _newest_ts(wh, table, None)


def _watermarks(wh: ReadableWarehouse, tables: set[str]) -> list[tuple[str, datetime]]:
    if "watermarks" not in tables:
        return []
    frame = wh.query("SELECT source, watermark FROM watermarks ORDER BY source")
    return [(str(s), as_utc(w)) for s, w in frame.iter_rows()]


def source_freshness(wh: ReadableWarehouse) -> list[SourceFreshness]:
    """One row per watermark source (sorted by name), then one per sample table that no
    watermark source loads (e.g. a warehouse the simulator filled), in `SAMPLE_TABLES` order."""
    tables = _tables(wh)
    rows: list[SourceFreshness] = []
    covered: set[str] = set()
    for source, mark in _watermarks(wh, tables):
        table = _table_of(source)
        if table is not None:
            covered.add(table)
        newest = _newest_of(wh, table, tables)
        gap = mark - newest if newest is not None else None
        rows.append(SourceFreshness(source, mark, newest, gap))
    for table in SAMPLE_TABLES:
        if table in tables and table not in covered:
            rows.append(SourceFreshness(table, None, _newest_of(wh, table, tables), None))
    return rows


def data_range(wh: ReadableWarehouse) -> tuple[datetime, datetime] | None:
    """The first and last instant any sample, roll-up row or allocation starts at (an
    allocation's exclusive `end_ts` is not data), or None for an empty warehouse. The samples'
    bounds come from their values table (`_samples_table`): through the view, every command that
    finds its period joined 75 M samples to their series (0.3-0.5 s at 1,000 GPUs × 31 days
    against 0.02 s)."""
    samples = _samples_table(_tables(wh))
    frame = wh.query(
        "SELECT min(lo) AS lo, max(hi) AS hi FROM ("
        f" SELECT min(ts) AS lo, max(ts) AS hi FROM {samples}"
        " UNION ALL SELECT min(ts), max(ts) FROM card_hours_hourly"
        " UNION ALL SELECT min(ts), max(ts) FROM allocations)"
    )
    lo, hi = frame["lo"][0], frame["hi"][0]
    return (lo, hi) if lo is not None and hi is not None else None


def created_at(wh: ReadableWarehouse) -> datetime | None:
    """When the warehouse file was created (its first schema step's time), or None for one
    without a schema record. A warehouse removed and made again at the same path has another:
    what the serving store computed on the old one is not the new one's (0256)."""
    if "schema_version" not in _tables(wh):
        return None
    value = wh.scalar("SELECT min(applied_at) FROM schema_version")
    return as_utc(value) if value is not None else None


def simulated(wh: ReadableWarehouse) -> bool:
    """True when the warehouse's samples come from the simulator alone: its watermark source is
    there and no collector's (`prometheus.*`). Such data is complete to its end and nothing
    collects more, so its age says nothing about collection: staleness does not apply."""
    sources = [source for source, _ in _watermarks(wh, _tables(wh))]
    return SIMULATOR_SOURCE in sources and not any(s.startswith("prometheus.") for s in sources)
