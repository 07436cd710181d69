"""The warehouse: one DuckDB file, one writer process, idempotent transactional loads.

Why these rules:
1. A load is one transaction (BEGIN … COMMIT). DuckDB's write-ahead log makes a crash or a
   `kill -9` in the middle leave the file exactly as it was before the load.
2. A load *owns* its window: for time-series tables it deletes `[start, end)` and inserts the
   new rows, so loading the same window twice changes nothing (rows are deduplicated by key
   inside the batch first, last one wins). Raw GPU samples are stored as a series dimension
   and integer-keyed values behind a `gpu_samples` view (`warehouse.sample_layout`). A load of
   `card_hours_hourly` rewrites the `card_hours_daily` rows of every day its window touches in
   the same transaction (`warehouse.daily_rollup`: the day rows stay the sums of the hours), and
   a load of GPU or token samples keeps their fingerprints per day current in it
   (`warehouse.sample_fingerprints`: what a day part's reader compares, decision 0274).
3. One writer: DuckDB takes an OS lock on the file; a second writer gets `WarehouseLockedError`
   with the path, never a corrupted file. Readers open with `read_only=True`.
4. Whose file: DuckDB never installs or loads an extension behind our back (a SQLite file passed
   as `--warehouse` would otherwise make it download `sqlite_scanner`), and a writer refuses a
   non-empty file that is not gpuledger's (`schema.foreign_objects`) before creating anything.
5. A dimension load replaces rows by key, except first/last-seen columns (`Column.merge`), which
   keep the earliest/latest of stored and new: loading another month never rewrites history.
   `nodes` and `namespaces` only move forward in time, and their loads extend `node_history` /
   `namespace_history` (configuration with its validity interval; `warehouse.dimension_load`).
7. Late samples leave a mark (docs/decisions/0185): a `gpu_samples` load whose window starts
   before the roll-up's watermark (`card_hours_hourly`: hours already rolled up) moves
   `ROLLUP_DIRTY` down to the window's start in the same transaction, so no crash between a
   load and its re-roll can leave a stale roll-up unnoticed; whoever rolls up (collect,
   `rollup`, `compact`, finalize) rolls those hours up again and clears it. The warehouse
   records only where the stored samples changed; which hours that touches (the sample pass's
   margin) is the roll-up's rule (`gpuledger.collect_rollup`). A `nodes` load whose labels
   re-configure rolled-up hours marks them the same way (`warehouse.node_history`, rule 4).
6. Several statements that must land together (a plan's status, its progress and its audit row)
   run inside `with wh.transaction():`; loads and audit appends inside it join it instead of
   committing on their own, so a failure anywhere leaves none of them stored.

DuckDB 2.0 note: a `SELECT` run through `execute()` must be fetched before the connection does
anything else; queries here go through `con.sql(q, params=...)` which returns a relation.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.core.errors import WarehouseError
from gpuledger.core.frames import TABLES, TableSpec
from gpuledger.core.window import Window, as_utc
from gpuledger.warehouse import daily_rollup
from gpuledger.warehouse.batch import LoadBatch, LoadStats, prepare, table_spec
from gpuledger.warehouse.connection import connect, memory_limit_bytes, os_failure, release_cached_blocks
from gpuledger.warehouse.dimension_load import dimension_insert, extend_history
from gpuledger.warehouse.sample_fingerprints import BY_SOURCE, SAMPLES, kept_current
from gpuledger.warehouse.sample_layout import SAMPLES_VIEW, write_samples
from gpuledger.warehouse.schema import LATEST, current_version, foreign_objects, migrate, refuse_newer

if TYPE_CHECKING:
    import pyarrow as pa

ROLLUP_SOURCE = "card_hours_hourly"
"""The roll-up's watermark (`analytics.usage.daily.ROLLUP_SOURCE`): hours rolled up before it."""
ROLLUP_SETTLED = "card_hours_hourly.settled"
"""Where the exactly rolled-up hours end (`gpuledger.collect_rollup` rule 2): hours between it
and the roll-up's watermark were rolled up without the samples after them (provisional)."""
ROLLUP_DIRTY = "card_hours_hourly.dirty"
"""Where stored raw samples changed below the roll-up's watermark (module docstring, 7)."""
ROLLUP_INPUTS = ("gpu_samples",)
"""The time-series tables the roll-up is computed from."""
LONG_READ_S = 0.02
"""A read this long or longer, `reading_once`, hands DuckDB's cached blocks back after it: at
1,000 GPUs a refresh makes 13 such reads, and its other 170 cached too little to matter."""

class Warehouse:
    """A connection to the warehouse file; use as a context manager."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, read_only: bool) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only
        self._in_transaction = False
        self._releasing = False

    # 1. Opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False,
             limits: WarehouseSettings | None = None) -> Warehouse:
        """Open (and, for a writer, create and migrate) the warehouse at `path`, DuckDB bounded
        by `limits` (`connect`)."""
        target = str(path)
        if target != ":memory:":
            file = Path(target)
            if read_only and not file.exists():
                raise WarehouseError(
                    f"{target}: no warehouse here yet; run `gpuledger demo` or `gpuledger collect`"
                )
            if not read_only:
                file.parent.mkdir(parents=True, exist_ok=True)
        con = connect(target, read_only=read_only, limits=limits)
        try:
            con.execute("SET TimeZone = 'UTC'")
            _require_ours(con, target)
            if read_only:
                version = current_version(con)
                refuse_newer(version, target)
                if version != LATEST:
                    raise WarehouseError(
                        f"{target}: schema version {version}, this gpuledger expects {LATEST}; "
                        "open it once for writing (e.g. `gpuledger collect`) to migrate"
                    )
            else:
                migrate(con, target)
        except Exception:
            con.close()
            raise
        return cls(con, target, read_only)

    def close(self) -> None:
        self.con.close()

    def reader(self) -> Warehouse:
        """A second connection to this open database, for reads on one other thread (a DuckDB
        connection serves one thread at a time). It sees what is committed, so that thread can
        compute from stored days while this writer loads the next (decision 0136)."""
        con = self.con.cursor()
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = false")
        return Warehouse(con, self.path, read_only=True)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # 2. Reading -------------------------------------------------------------------------
    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        """Run a parameterized query and return a Polars frame."""
        started = time.perf_counter()
        frame = self.con.sql(sql, params=params).pl()
        self._read(started)
        return frame

    def scalar(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> Any:
        started = time.perf_counter()
        rows = self.con.sql(sql, params=params).fetchall()
        self._read(started)
        return rows[0][0] if rows else None

    @contextmanager
    def reading_once(self) -> Iterator[Warehouse]:
        """Within, where DuckDB's bound cannot hold this warehouse's file (a block it caches is
        then evicted before it is read again anyway), its cached blocks are handed back after
        each read of `LONG_READ_S` or more and at each `hand_back_cache()`
        (`release_cached_blocks`): for one thread that reads each block about once and keeps
        Python frames of what it read (a refresh's month results, docs/decisions/0280). Where
        the bound holds the file, the cache is kept: re-reads are then free, and the memory is
        what the settings gave DuckDB."""
        self._releasing = self._bound_below_file()
        try:
            yield self
        finally:
            self._releasing = False

    def _bound_below_file(self) -> bool:
        if self.path == ":memory:":
            return False
        return memory_limit_bytes(self) < os.path.getsize(self.path)

    def hand_back_cache(self) -> None:
        """Within `reading_once`, where it releases: DuckDB's cached blocks handed back now (a
        step of the caller's done)."""
        if self._releasing:
            self.release_cache()

    def release_cache(self) -> None:
        """DuckDB's cached blocks of this warehouse handed back now, whatever the bound
        (`release_cached_blocks`): only where no statement runs on it meanwhile, on any
        connection (the demo's load, once a week of days, docs/decisions/0285)."""
        release_cached_blocks(self.con)

    def _read(self, started: float) -> None:
        if self._releasing and time.perf_counter() - started >= LONG_READ_S:
            self.release_cache()

    def count(self, table: str) -> int:
        table_spec(table)
        return int(self.scalar(f"SELECT count(*) FROM {table}"))

    def watermark(self, source: str) -> datetime | None:
        value = self.scalar("SELECT watermark FROM watermarks WHERE source = ?", [source])
        return as_utc(value) if value is not None else None

    # 3. Writing -------------------------------------------------------------------------
    def load(self, batch: LoadBatch) -> LoadStats:
        """Load a batch in one transaction (see module docstring for the replace rules)."""
        self._require_writer()
        if batch.arrow is None:
            batch = prepare(batch)
        assert batch.arrow is not None
        rows: dict[str, int] = {}
        replaced: dict[str, int] = {}
        with self.transaction():
            for name, frame in batch.frames.items():
                try:
                    replaced[name] = self._write(table_spec(name), batch.arrow[name], batch.window)
                except duckdb.Error as exc:  # the whole batch rolls back (transaction())
                    if (failure := os_failure(exc, self.path)) is not None:
                        raise failure from exc
                    first = str(exc).splitlines()[0]
                    raise WarehouseError(
                        f"{self.path}: load of {name} failed, nothing of this batch was stored "
                        f"({first})"
                    ) from exc
                rows[name] = frame.height
            self._mark_late(batch)
            for source, moment in batch.watermarks.items():
                if moment is None:  # a mark that no longer holds (e.g. ROLLUP_DIRTY once re-rolled)
                    self.con.execute("DELETE FROM watermarks WHERE source = ?", [source])
                    continue
                self.con.execute(
                    "INSERT OR REPLACE INTO watermarks VALUES (?, ?, now())", [source, as_utc(moment)]
                )
        return LoadStats(rows, replaced)

    def _mark_late(self, batch: LoadBatch) -> None:
        """Rule 7: move `ROLLUP_DIRTY` down to a roll-up input's window below the roll-up."""
        if batch.window is None or not any(name in batch.frames for name in ROLLUP_INPUTS):
            return
        self._mark_dirty(batch.window.start)

    def _mark_dirty(self, start: datetime | None) -> None:
        """Move `ROLLUP_DIRTY` down to `start` where it is below the roll-up's watermark (rule 7:
        late samples; node labels that re-configure rolled-up hours, `warehouse.node_history`)."""
        rolled = self.watermark(ROLLUP_SOURCE)
        if start is None or rolled is None or as_utc(start) >= rolled:
            return
        dirty = self.watermark(ROLLUP_DIRTY)
        if dirty is None or as_utc(start) < dirty:
            self.con.execute("INSERT OR REPLACE INTO watermarks VALUES (?, ?, now())",
                             [ROLLUP_DIRTY, as_utc(start)])

    @contextmanager
    def transaction(self) -> Iterator[Warehouse]:
        """One write transaction: everything inside commits together or not at all.

        Re-entrant: a transaction opened inside another joins it (DuckDB has no nested
        transactions), so `load` and `append_audit` can be parts of a caller's larger unit.
        """
        self._require_writer()
        if self._in_transaction:
            yield self
            return
        self.con.execute("BEGIN TRANSACTION")
        self._in_transaction = True
        try:
            yield self
        except BaseException:
            self._in_transaction = False
            self.con.execute("ROLLBACK")
            raise
        self._in_transaction = False
        try:
            self.con.execute("COMMIT")
        except duckdb.Error as exc:
            if (failure := os_failure(exc, self.path)) is not None:
                raise failure from exc
            raise

    def execute(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one writing statement (e.g. `UPDATE … RETURNING`) and return the rows it returns."""
        self._require_writer()
        return self.con.execute(sql, params or []).fetchall()

    def _write(self, spec: TableSpec, frame: pa.Table, window: Window | None) -> int:
        """Write one table's rows; the view is unregistered only on success, because after a
        failed statement the transaction is aborted and unregistering would mask the error."""
        view = f"_load_{spec.name}"
        self.con.register(view, frame)  # replaced by the next load of this table if left behind
        removed = self._write_view(spec, view, window)
        self.con.unregister(view)
        return removed

    def _write_view(self, spec: TableSpec, view: str, window: Window | None) -> int:
        cols = ", ".join(spec.column_names)
        removed = 0
        if spec.name == SAMPLES_VIEW:  # a view over series + values (warehouse.sample_layout)
            assert window is not None
            with kept_current(self.con, SAMPLES, window.start, window.end):  # (0274)
                removed = write_samples(self.con, view, window)
        elif spec.kind == "timeseries":
            assert window is not None
            # DELETE reports how many rows it removed: no separate count(*) scan. Zone maps
            # skip every row group outside the window (no index on ts, decision 0070).
            kind = BY_SOURCE.get(spec.name)
            with kept_current(self.con, kind, window.start, window.end) if kind else nullcontext():
                deleted = self.con.execute(
                    f"DELETE FROM {spec.name} WHERE ts >= ? AND ts < ?", [window.start, window.end]
                ).fetchall()
                removed = int(deleted[0][0]) if deleted else 0
                self.con.execute(f"INSERT INTO {spec.name} ({cols}) SELECT {cols} FROM {view}")
            if spec.name == daily_rollup.HOURLY:  # its day rows follow, in this transaction
                daily_rollup.refresh_days(self.con, window)
        elif spec.kind == "interval":
            self._merge_intervals(spec, view)
        elif spec.kind == "dimension":
            self.con.execute(dimension_insert(spec, view))
            extend_history(self.con, spec.name, view, self._mark_dirty)  # node/namespace history
        else:
            self.con.execute(f"INSERT INTO {spec.name} ({cols}) SELECT {cols} FROM {view}")
        return removed

    def _merge_intervals(self, spec: TableSpec, view: str) -> None:
        """Coalesce new spans with stored spans of the same key that overlap or touch them.

        1. Gather the stored spans of the keys in the batch, plus the new spans.
        2. Islands per key: sorted by start, a span opens a new island when it starts after the
           latest end seen so far; an island keeps the earliest start, the latest end and the
           other columns of its latest-starting span (the newest facts).
        3. Replace the stored spans of those keys with the islands.
        """
        key = ", ".join(spec.key)
        cols = ", ".join(spec.column_names)
        others = [c for c in spec.column_names if c not in (*spec.key, "start_ts", "end_ts")]
        match = " AND ".join(f"t.{k} IS NOT DISTINCT FROM n.{k}" for k in spec.key)
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE _spans AS "
            f"SELECT {cols} FROM {spec.name} t WHERE EXISTS (SELECT 1 FROM {view} n WHERE {match}) "
            f"UNION ALL SELECT {cols} FROM {view}"
        )
        self.con.execute(
            f"DELETE FROM {spec.name} t WHERE EXISTS (SELECT 1 FROM {view} n WHERE {match})"
        )
        picks = ", ".join(f"arg_max({c}, start_ts) AS {c}" for c in others)
        self.con.execute(
            f"""
            INSERT INTO {spec.name} ({cols})
            WITH ordered AS (
                SELECT *, max(end_ts) OVER (
                    PARTITION BY {key} ORDER BY start_ts, end_ts
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
                FROM _spans
            ), islands AS (
                SELECT *, sum(CASE WHEN reach IS NULL OR start_ts > reach THEN 1 ELSE 0 END)
                    OVER (PARTITION BY {key} ORDER BY start_ts, end_ts) AS island
                FROM ordered
            )
            SELECT {cols} FROM (
                SELECT {key}, island, min(start_ts) AS start_ts, max(end_ts) AS end_ts
                    {', ' + picks if picks else ''}
                FROM islands GROUP BY {key}, island
            )
            """
        )
        self.con.execute("DROP TABLE _spans")

    def append_audit(self, entry: Mapping[str, Any]) -> int:
        """Append one audit record (its own statement, or part of an open `transaction()`);
        returns its sequence number."""
        self._require_writer()
        seq = int(self.scalar("SELECT nextval('audit_seq')"))
        cols = [c for c in TABLES["audit_log"].column_names if c != "seq"]
        values = [entry.get(c) for c in cols]
        self.con.execute(
            f"INSERT INTO audit_log (seq, {', '.join(cols)}) VALUES (?, {', '.join('?' for _ in cols)})",
            [seq, *values],
        )
        return seq

    def _require_writer(self) -> None:
        if self.read_only:
            raise WarehouseError(f"{self.path}: opened read-only; this operation writes")


def _require_ours(con: duckdb.DuckDBPyConnection, target: str) -> None:
    """Refuse another application's DuckDB file before anything is created in it."""
    foreign = foreign_objects(con)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise WarehouseError(
            f"{target}: a DuckDB file of another application (holds {shown}; no gpuledger "
            "schema marker); refusing to add gpuledger's tables to it: use a new path"
        )

