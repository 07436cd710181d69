"""The serving store: a small DuckDB file the writer publishes for the dashboard to read.

Why (docs/decisions/0120-serving-store.md): the dashboard used to copy the whole warehouse for
every snapshot (4.3 GB and 45 s for a 1,000-GPU month), though its pages read roll-ups,
inventory and plans. So every writer, after it commits, publishes `<warehouse>.serving.duckdb`
beside the warehouse, and the dashboard opens that file read-only, in place, without a copy:

1. What it holds: every warehouse table, except that `gpu_samples` keeps only what a compacted
   warehouse keeps with no retention window (`warehouse.retention.removable_until` with
   `keep_from` = the end of time): the samples the hourly roll-up does not hold yet, plus the
   sample pass's margin before them, so every bill, idle list and heatmap is the same to the cent
   (the retention test proves it for compaction), and the newest sample of each device is there
   (MIG holders "now"). The MIG samples of each month's last hour stay too: the Fleet page's
   MIG map of a past month shows who held each instance at its end. `token_samples` keeps its
   newest hour (freshness); the fingerprints (`warehouse.sample_fingerprints`) describe the
   warehouse's rows, not the store's tail, and are not copied. Results of the analyses that
   need the raw samples of a whole month (recommendations, token costs, advice kinds) are
   written by the publisher's caller into `serving_results` (`put_result`,
   `warehouse.serving_results_table`), computed on the warehouse, each with the rules it was
   computed under (docs/decisions/0150).
2. Growth: the big, append-mostly tables (`PARTITIONED`) are kept per UTC day with a
   fingerprint each (row count and the sum of row hashes, as their writers keep them: 0289);
   a publish rewrites only the days whose fingerprint changed (a `collect --follow` minute or
   an hourly refresh: the running day only, not its month; `warehouse.serving_day_parts`,
   decision 0266). The other tables (pods, series, preemptions) have one fingerprint each and
   are copied only when it changed (`update_whole`, decision 0271).
3. Crash safety: a publish copies the current file to a temporary name, updates the copy, and
   renames it over the published one (atomic on one file system; open readers keep the old
   inode). A kill leaves the previous file intact; the next publish replaces the leftover.
   Publishers are one at a time by the publish lock (0140), not by the writer lock.
4. `<warehouse>.serving.json` beside it records the warehouse's (mtime, size) stamp after the writer
   closed, so a reader can tell that someone wrote the warehouse without publishing. Writers
   publish only for a served warehouse (`is_served`): one the dashboard has read once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.core.errors import WarehouseError, WarehouseLockedError
from gpuledger.core.frames import CARD_HOURS_HOURLY
from gpuledger.core.rules_record import RecordedRules
from gpuledger.warehouse import serving_results_table as results_table
from gpuledger.warehouse.connection import connect
from gpuledger.warehouse.retention import mark_removed, removable_until
from gpuledger.warehouse.sample_fingerprints import BY_SOURCE
from gpuledger.warehouse.sample_layout import SAMPLES_VIEW, SERIES_TABLE, VALUES_TABLE, VIEW_DDL
from gpuledger.warehouse.serving_day_parts import (
    PARTITIONED,
    PARTS_TABLE,
    ensure_parts_table,
    update_partitioned,
    update_whole,
)
from gpuledger.warehouse.store import Warehouse

SUFFIX = ".serving.duckdb"
RAW_TABLE = VALUES_TABLE
"""The raw sample values (v008; the store keeps every series row, the raw tail, the view)."""
TOKEN_TABLE = "token_samples"
TOKEN_TAIL = timedelta(hours=1)
"""Token samples kept (freshness); token costs are a stored result (0121)."""
ROLLUP_SOURCE = CARD_HOURS_HOURLY.name
"""The roll-up watermark source: the table's name (as `analytics.usage.daily.ROLLUP_SOURCE`)."""
RESULTS_TABLE = results_table.RESULTS_TABLE
OWN_TABLES = (PARTS_TABLE, RESULTS_TABLE)
FINGERPRINTS = {kind.table for kind in BY_SOURCE.values()}
MONTH_END_RAW = timedelta(hours=1)
"""MIG samples kept before each month's end (the MIG map's holders at a past month's end)."""
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)

Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class PublishStats:
    """What one publish did (for the benchmark and the decision note)."""

    path: Path
    seconds: float
    rewritten_parts: int
    kept_parts: int
    raw_rows: int
    bytes: int
    tables_copied: int = 0
    """The tables kept whole that were copied (their fingerprint changed, `update_whole`)."""


def serving_path(warehouse: str | Path) -> Path:
    """`fleet.duckdb` → `fleet.serving.duckdb` (same folder: the rename stays on one disk)."""
    path = Path(warehouse)
    return path.with_name(path.name.removesuffix(".duckdb") + SUFFIX)


def stamp_path(warehouse: str | Path) -> Path:
    return serving_path(warehouse).with_suffix(".json")


def file_stamp(path: Path) -> Stamp | None:
    """(mtime_ns, size) of a DuckDB file and of its WAL: changes whenever a writer commits."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    try:
        wal = Path(f"{path}.wal").stat()
        wal_stamp = (wal.st_mtime_ns, wal.st_size)
    except FileNotFoundError:
        wal_stamp = (0, -1)
    return (st.st_mtime_ns, st.st_size, *wal_stamp)


def record_published(warehouse: str | Path) -> None:
    """After the writer closed the warehouse: note its stamp (point 4), atomically."""
    stamp = file_stamp(Path(warehouse))
    target = stamp_path(warehouse)
    if stamp is None or not serving_path(warehouse).exists():
        return
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"warehouse_stamp": list(stamp)}))
    os.replace(tmp, target)


def is_served(warehouse: str | Path) -> bool:
    """Whether a dashboard reads this warehouse's serving store (it exists, or a dashboard asked
    for one): writers publish only then, so a warehouse nobody serves pays nothing."""
    return serving_path(warehouse).exists() or stamp_path(warehouse).exists()


def request_publish(warehouse: str | Path) -> None:
    """A dashboard that could not publish (a collector holds the warehouse) asks the next
    writer to: the stamp file without a stamp."""
    target = stamp_path(warehouse)
    if not target.exists():
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"warehouse_stamp": None}))
        os.replace(tmp, target)


def published_stamp(warehouse: str | Path) -> Stamp | None:
    """The warehouse stamp recorded by the last publisher, or None (never, or unreadable)."""
    try:
        raw = json.loads(stamp_path(warehouse).read_text())["warehouse_stamp"]
        return (int(raw[0]), int(raw[1]), int(raw[2]), int(raw[3]))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def publish(wh: Warehouse, *, margin: timedelta) -> PublishStats:
    """Write the serving store of `wh` (a writer that has committed): copy forward, update the
    copy, rename it over the published file (module docstring, points 1–3), results kept as
    they were (`Publication` to put results too)."""
    with Publication(wh, margin=margin) as pub:
        pass
    return pub.stats


class Publication:
    """One publish as a context: tables are updated on entry, results may be put inside, and
    the file is renamed into place on a clean exit (discarded on an exception)."""

    def __init__(self, wh: Warehouse, *, margin: timedelta) -> None:
        self.wh = wh
        self.margin = margin
        self.target = serving_path(wh.path)
        self.tmp = self.target.with_name(f".{self.target.name}.tmp")
        """One name: publishers are one at a time (the publish lock, `_lock`), and the next
        publish replaces what a killed one left."""
        self._lock_fd: int | None = None
        self.stats = PublishStats(self.target, 0.0, 0, 0, 0, 0)
        self._started = 0.0
        self._counts = (0, 0, 0)
        self.srv = "srv"  # the attached store's catalog name, chosen free in _enter

    def __enter__(self) -> Publication:
        self._lock()
        try:
            return self._enter()
        except duckdb.Error as exc:
            self._unlock()
            raise WarehouseError(f"{self.target}: publish failed ({str(exc).splitlines()[0]})") from None
        except BaseException:
            self._unlock()
            raise

    def _lock(self) -> None:
        """The publish lock (`<store>.lock`, flock): a writer's publish and a read-only results
        step (`refresh-serving`) never share the temporary file; a killed one's lock dies too."""
        fd = os.open(self.target.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            busy = f"{self.target}: another process is publishing the serving store"
            raise WarehouseLockedError(busy) from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def _enter(self) -> Publication:
        self._started = time.perf_counter()
        _remove(self.tmp)
        if self.target.exists():
            shutil.copyfile(self.target, self.tmp)
        # READ_WRITE: the results step publishes from a read-only warehouse connection
        self.srv = _free_alias(self.wh.con)
        attach = "ATTACH '{}' AS {} (READ_WRITE)".format(str(self.tmp).replace("'", "''"), self.srv)
        try:
            self.wh.con.execute(attach)
        except duckdb.Error:  # an unreadable previous file: start over
            _remove(self.tmp)
            self.wh.con.execute(attach)
        try:
            self._counts = _update_tables(self.wh, self.margin, self.srv)
        except BaseException:
            self._discard()
            raise
        return self

    def stored_basis(self) -> dict[tuple[str, str], str]:
        """(name, period) → basis of every result in the store (what `put_result` stored)."""
        return results_table.stored_basis(self.wh.con, self.srv)

    def put_result(self, name: str, period: str, basis: str, payload: bytes, *,
                   rules: RecordedRules | None) -> None:
        """Store (or replace) one computed result, e.g. a month's recommendations, with the
        rules it was computed under (None: its inputs carried none, "rules not recorded")."""
        results_table.put(self.wh.con, self.srv, name, period, basis=basis, payload=payload, rules=rules)

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            if exc_type is not None:
                self._discard()
                return
            try:
                self._finish()
            except duckdb.Error as exc:
                self._discard()
                raise WarehouseError(f"{self.target}: publish failed ({str(exc).splitlines()[0]})") from None
        finally:
            self._unlock()

    def _finish(self) -> None:
        raw = int(self.wh.con.execute(f"SELECT count(*) FROM {self.srv}.{RAW_TABLE}").fetchall()[0][0])
        self.wh.con.execute(f"CHECKPOINT {self.srv}")
        self.wh.con.execute(f"DETACH {self.srv}")
        with open(self.tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(self.tmp, self.target)
        rewritten, kept, copied = self._counts
        self.stats = PublishStats(self.target, round(time.perf_counter() - self._started, 3), rewritten,
                                  kept, raw, self.target.stat().st_size, copied)

    def _discard(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self.wh.con.execute(f"DETACH {self.srv}")
        _remove(self.tmp)


def _free_alias(con: duckdb.DuckDBPyConnection) -> str:
    """A catalog name no attached database has (a fixed `srv` collided with `srv.duckdb`)."""
    taken = {str(r[0]) for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    return next(name for i in range(len(taken) + 1) if (name := f"srv{i or ''}") not in taken)


def _remove(path: Path) -> None:
    for suffix in ("", ".wal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _base_tables(con: duckdb.DuckDBPyConnection, catalog: str) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? "
        "AND table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1", [catalog]
    ).fetchall()
    return [str(r[0]) for r in rows]


def _update_tables(wh: Warehouse, margin: timedelta, srv: str) -> tuple[int, int, int]:
    """Points 1 and 2: bring every table of the store (`srv`) up to the committed state; (days
    rewritten, days kept, whole tables copied)."""
    con = wh.con
    catalog = str(con.execute("SELECT current_database()").fetchall()[0][0])
    ensure_parts_table(con, srv)
    results_table.ensure_table(con, srv)
    source = _base_tables(con, catalog)
    for stale in set(_base_tables(con, srv)) - set(source) - set(OWN_TABLES):
        con.execute(f'DROP TABLE {srv}."{stale}"')
    rewritten = kept = copied = 0
    for table in source:
        if table in FINGERPRINTS:  # the warehouse's tables' (0274, 0289), not the store's
            continue
        if table in PARTITIONED:
            r, k = update_partitioned(con, catalog, table, PARTITIONED[table], srv)
            rewritten, kept = rewritten + r, kept + k
        elif table not in (RAW_TABLE, TOKEN_TABLE):
            copied += update_whole(con, catalog, table, srv)
        else:
            ranges = _raw_ranges(wh, margin, catalog) if table == RAW_TABLE else _token_ranges(wh)
            # one branch per time range: each one skips what it does not need by zone maps
            src = f'"{catalog}".main."{table}"'
            union = " UNION ALL ".join(f"SELECT * FROM {src} WHERE {w}" for w, _ in ranges)
            params = [p for _, ps in ranges for p in ps]
            con.execute(f'CREATE OR REPLACE TABLE {srv}."{table}" AS {union}', params)
    mark_removed(con, removable_until(wh, FAR_FUTURE, margin, ROLLUP_SOURCE)[1], catalog=srv)  # (0147)
    # the view binds its tables in its own catalog: the store's series and values
    con.execute(VIEW_DDL.replace(f"VIEW {SAMPLES_VIEW}", f"OR REPLACE VIEW {srv}.{SAMPLES_VIEW}", 1))
    return rewritten, kept, copied


Ranges = list[tuple[str, list[Any]]]


def _raw_ranges(wh: Warehouse, margin: timedelta, catalog: str) -> Ranges:
    """Point 1: the raw samples a compacted warehouse with no retention window keeps (before the
    roll-up's first hour, and from the end of what it could remove), plus the MIG samples of
    the last hour of each month in between; disjoint half-open ranges."""
    start, end, _ = removable_until(wh, FAR_FUTURE, margin, ROLLUP_SOURCE)
    if start is None or end is None:
        return [("TRUE", [])]
    out: Ranges = [("ts < ?", [start]), ("ts >= ?", [end])]
    mig = f'SELECT series_id FROM "{catalog}".main.{SERIES_TABLE} WHERE gpu_i_id >= 0'
    month_end = _month_bounds(start.strftime("%Y-%m"))[1]
    while month_end - MONTH_END_RAW < end:
        lo, hi = max(month_end - MONTH_END_RAW, start), min(month_end, end)
        if lo < hi:
            out.append((f"ts >= ? AND ts < ? AND series_id IN ({mig})", [lo, hi]))
        month_end = _month_bounds(month_end.strftime("%Y-%m"))[1]
    return out


def _token_ranges(wh: Warehouse) -> Ranges:
    newest = wh.scalar(f"SELECT max(ts) FROM {TOKEN_TABLE}")
    return [("ts >= ?", [newest - TOKEN_TAIL])] if newest is not None else [("TRUE", [])]


def _month_bounds(month: str) -> list[datetime]:
    """`2026-11` → [2026-11-01, 2026-12-01) in UTC (a range the zone maps can skip by)."""
    year, mon = int(month[:4]), int(month[5:7])
    start = datetime(year, mon, 1, tzinfo=UTC)
    return [start, datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=UTC)]


def open_serving(warehouse: str | Path, *, at: Path | None = None) -> Warehouse:
    """A read-only `Warehouse` on the published serving store (no copy, no lock on the
    warehouse), or on `at`, a link to it; `WarehouseError` when there is none or it cannot be
    read."""
    path = at or serving_path(warehouse)
    if not path.exists():
        raise WarehouseError(f"{path}: no serving store published yet")
    con = connect(str(path), read_only=True, config=reader_config(path), what="the serving store")
    con.execute("SET TimeZone = 'UTC'")
    return Warehouse(con, str(path), read_only=True)


def reader_config(path: Path) -> dict[str, Any]:
    """A serving-store reader's DuckDB (0141): a buffer pool bounded by the file (4x, at least 512
    MiB; not 80 % of RAM), two threads at most (the pages' queries are small; each thread keeps
    buffers), freed memory returned at 16 MiB, not 128 (70-80 MiB less resident at 1,000 GPUs)."""
    limit = max(512 * 2**20, 4 * path.stat().st_size)
    return {"memory_limit": f"{limit // 2**20}MiB", "threads": min(2, os.cpu_count() or 1),
            "allocator_flush_threshold": "16MiB"}

