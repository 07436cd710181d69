"""Day parts: what a per-minute advice query gave for one UTC day, kept beside the serving store.

Why (issue 34 item 1, docs/decisions/0248): `refresh-serving` recomputes a month's results
whenever their basis moves, once an hour for the running month, and the overcommit and
autoscaling advice read the month's per-minute inputs a day at a time (`analytics.advice.run
.by_day`): at 256 GPUs about 0.4 s and 0.7 s a day, 30 days each time, for one new hour. A
day's answer depends only on the SQL and on the rows it reads, so it is kept here under a
content stamp of those rows (`warehouse.queries.advice.per_minute_inputs_stamps`, read from
the fingerprints every write keeps, decision 0274) and read back while the stamp is unchanged:
a refresh queries only the days whose inputs changed (the running day; a day that was
backfilled), and the month is put together from the parts exactly as a full read puts it
together from the days. The token costs' counters are read the same way
(`warehouse.queries.workloads.token_increases`: a day's increases and its first and last
samples, joined to the day before). What spans days (each allocation's statistics over the
month) is kept whole with every day's stamp, and only its rows that reach a changed day are
asked again (`DayParts.spanning`, decision 0261).

The parts live in their own DuckDB file (`<warehouse>.dayparts.duckdb`), not in the serving
store, which every publish copies whole: a month of serving minutes is tens of MB. Every reader
of the month's per-minute advice uses them (`refresh-serving`, `report monthly`, `recommend
--kind`: `kept_day_parts`), one process at a time under the parts' own lock, so a report issued
after the chart's refreshes reads only the days that moved since (decision 0254). One
transaction per part, so a kill leaves whole parts; the file is a cache: one that cannot be
opened is removed and started again, and deleting it only costs the next reader the full read.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.core.errors import WarehouseError
from gpuledger.core.period import Period
from gpuledger.core.window import DAY, Window, floor_time
from gpuledger.warehouse.connection import connect, release_cached_blocks
from gpuledger.warehouse.keyed_rows import replace_row
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries.advice import per_minute_inputs_stamps

TABLE = "day_parts"
DayRead = Callable[[ReadableWarehouse, datetime, datetime], pl.DataFrame]
Ranges = Sequence[tuple[datetime, datetime]]
SpanRead = Callable[[ReadableWarehouse, datetime, datetime, Ranges], pl.DataFrame]
"""A window's read whose rows span days: `(wh, start, end, touching)` → every row when
`touching` is empty, else (at least) those with a sample in one of the ranges."""
log = logging.getLogger(__name__)


def day_parts_path(warehouse: str | Path) -> Path:
    """The day parts' file beside the warehouse (`gpuledger.duckdb` → `gpuledger.dayparts.duckdb`)."""
    path = Path(warehouse)
    return path.with_name(f"{path.stem}.dayparts.duckdb")


@contextlib.contextmanager
def kept_day_parts(warehouse: str | Path,
                   limits: WarehouseSettings | None = None) -> Iterator[DayParts | None]:
    """The day parts of the warehouse at `warehouse`, open for one reader of the month's
    per-minute advice, under the parts' own lock (`<warehouse>.dayparts.lock`, flock, not
    waited for: a second reader reads the month whole rather than queue behind a refresh).
    `limits`: the warehouse's settings, whose memory bound the parts' DuckDB takes too.
    None, and the month is read whole, for a warehouse that is not a file, parts held by
    another process, or parts that cannot be opened; what failed mid-way is logged on exit."""
    path = day_parts_path(warehouse)
    if not Path(warehouse).is_file():
        yield None
        return
    try:
        lock = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a read-only folder: no parts, the month read whole
        log.info("day parts not used (%s); the month is read whole", exc)
        yield None
        return
    try:
        days = _locked(path, lock, limits)
        if days is None:
            yield None
            return
        with days:
            yield days
        if days.failure is not None:
            log.warning("day parts not kept (%s); those days were read whole", days.failure)
    finally:
        os.close(lock)  # closing the descriptor releases the flock


def _locked(path: Path, lock: int, limits: WarehouseSettings | None) -> DayParts | None:
    """The parts at `path` once `lock` is held; None (logged) when another process holds it
    or the file cannot be opened."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("day parts %s in use by another process; the month is read whole", path.name)
        return None
    try:
        return DayParts(path, limits)
    except (WarehouseError, OSError) as exc:
        log.warning("day parts not kept (%s); the month is read whole", exc)
        return None


class DayParts:
    """The day parts of one warehouse, open for one reader (a context: the file is closed on exit).

    `day(name, wh, start, end, read)` is what a per-day reader calls instead of `read(wh,
    start, end)`: the stored frame when the day's inputs have the stamp it was stored under,
    else `read`'s frame, stored. `reads` counts the days actually queried (for tests and the
    bench). The parts are a cache: once reading or writing one fails (a full disk, a damaged
    part), `failure` says why and every later day is read whole without them, so the round's
    results are still computed (`kept_day_parts` logs it)."""

    def __init__(self, path: str | Path, limits: WarehouseSettings | None = None) -> None:
        self.path = Path(path)
        # the warehouse's memory bound (its own DuckDB instance caches the parts' blocks too),
        # never its spill folder: two instances must not spill into one folder
        self._limits = WarehouseSettings(memory_limit=limits.memory_limit) if limits else None
        self.con = self._connect()
        self.reads = 0
        self.hits = 0
        self.failure: str | None = None
        self._stamps: dict[tuple[datetime, datetime], str] = {}
        self._kept: dict[tuple[str, date], dict[date, tuple[str, bytes | None]]] = {}

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """The parts' file, bounded like every connection (`warehouse.connection.connect`);
        one DuckDB cannot open is removed and started again (it is a cache)."""
        try:
            return _ready(connect(str(self.path), limits=self._limits, what="day parts"))
        except WarehouseError:
            for stale in (self.path, self.path.with_name(self.path.name + ".wal")):
                stale.unlink(missing_ok=True)
        return _ready(connect(str(self.path), limits=self._limits, what="day parts"))

    def __enter__(self) -> DayParts:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.close()

    def day(self, name: str, wh: ReadableWarehouse, start: datetime, end: datetime,
            read: DayRead) -> pl.DataFrame:
        """`read(wh, start, end)` for the UTC day `[start, end)`, from the parts when its inputs
        are unchanged. A part is kept only for a whole day (a window's partial edge day is read)."""
        if self.failure is not None or end - start != DAY or floor_time(start, DAY) != start:
            self.reads += 1
            return read(wh, start, end)
        stamp = self._stamp(wh, start, end)
        try:
            day = start.date()
            month = self._kept_of(name, day)
            kept = month.get(day)
            if kept is not None and kept[0] == stamp:
                payload = kept[1] if kept[1] is not None else self._payload(name, day, stamp)
                if payload is not None:
                    month[day] = (stamp, None)  # handed out: its bytes let go (asked again, one row read)
                    part = pl.read_ipc(io.BytesIO(payload))
                    self.hits += 1
                    return part
        except (duckdb.Error, pl.exceptions.PolarsError, OSError) as exc:
            self._fail(exc)
        self.reads += 1
        frame = read(wh, start, end)
        self._store(name, start.date(), stamp, frame)
        return frame

    def expect(self, wh: ReadableWarehouse, window: Window) -> None:
        """Stamp every whole UTC day of `window` at once, before a reader of the window asks for
        them a day at a time: one statement for all the days (`per_minute_inputs_stamps`),
        not one a day."""
        self._stamps_of(wh, [(day.start, day.end) for day in window.days()
                             if day.end - day.start == DAY and floor_time(day.start, DAY) == day.start])

    def _stamp(self, wh: ReadableWarehouse, start: datetime, end: datetime) -> str:
        """The day's inputs stamp, taken once per reader: every kept read shares the day's."""
        return self._stamps_of(wh, [(start, end)])[0]

    def _stamps_of(self, wh: ReadableWarehouse, days: Sequence[tuple[datetime, datetime]]) -> list[str]:
        """The inputs stamps of `days`, those not taken yet by this reader taken together."""
        missing = [day for day in days if day not in self._stamps]
        if missing:
            self._stamps.update(zip(missing, per_minute_inputs_stamps(wh, missing), strict=True))
        return [self._stamps[day] for day in days]

    def spanning(self, name: str, wh: ReadableWarehouse, window: Window, read: SpanRead,
                 keys: Sequence[str]) -> pl.DataFrame:
        """`read(wh, start, end, ())` for a `window` of whole UTC days, whose rows span days (an
        allocation's statistics over all its samples): kept whole under every day's stamp, and
        when some days' inputs changed, only `read(wh, start, end, changed)` is asked again,
        the rows with a sample in the changed ranges (`first_ts`..`last_ts` reaching one), each
        over the whole window; a kept row whose `keys` came back, or whose span reaches a
        changed day, is replaced. The month's exact statistics then cost the allocations of
        the running day (6 % of a 1,000-GPU month's samples), not the month's (decision 0261)."""
        start, end = window.start, window.end
        if self.failure is not None or floor_time(start, DAY) != start or floor_time(end, DAY) != end:
            self.reads += 1
            return read(wh, start, end, ())
        days = [(day.start, day.end) for day in window.days()]
        stamps = {lo.isoformat(): stamp
                  for (lo, _), stamp in zip(days, self._stamps_of(wh, days), strict=True)}
        key = f"{name}:{end.date().isoformat()}"
        kept: pl.DataFrame | None = None
        kept_stamps: dict[str, str] = {}
        try:
            row = self._kept_row(key, start.date())
            if row is not None:
                kept_stamps, kept = json.loads(row[0]), pl.read_ipc(io.BytesIO(row[1]))
        except (duckdb.Error, pl.exceptions.PolarsError, OSError, ValueError) as exc:
            self._fail(exc)
        changed = _ranges([(lo, hi) for lo, hi in days if kept is None or kept_stamps.get(lo.isoformat())
                           != stamps[lo.isoformat()]])
        if kept is not None and not changed:
            self.hits += 1
            return kept
        self.reads += 1
        if kept is None:
            frame = read(wh, start, end, ())
        else:
            fresh = read(wh, start, end, changed)
            reach = pl.any_horizontal([(pl.col("first_ts") < hi) & (pl.col("last_ts") >= lo)
                                       for lo, hi in changed])
            still = kept.filter(~reach).join(fresh.select(keys), on=list(keys), how="anti", nulls_equal=True)
            frame = pl.concat([still, fresh]) if not fresh.is_empty() else still
        self._store(key, start.date(), json.dumps(stamps), frame)
        return frame

    def _store(self, name: str, day: date, stamp: str, frame: pl.DataFrame) -> None:
        """Keep `frame` under (`name`, `day`) with `stamp`, in one transaction (a kill keeps the
        old part or the new; `keyed_rows`); a failure is remembered (`failure`), the frame still
        returned."""
        if self.failure is not None:
            return
        buffer = io.BytesIO()
        frame.write_ipc(buffer, compression="zstd")
        payload = buffer.getvalue()
        try:
            replace_row(self.con, TABLE, {"name": name, "day": day}, {"stamp": stamp, "payload": payload})
        except duckdb.Error as exc:
            self._fail(exc)
            return
        month = self._kept.get((name, day.replace(day=1)))
        if month is not None:
            month[day] = (stamp, None)  # its frame is the caller's; asked again, one row is read

    def _kept_of(self, name: str, day: date) -> dict[date, tuple[str, bytes | None]]:
        """The parts of query `name` in `day`'s calendar month by day (stamp, payload): read in
        one query when first asked for (fetching one row's BLOB reads the whole row group's,
        about 30 ms at 1,000 GPUs whatever the part's size; a month of them at once takes about
        as long) and kept current as this reader stores parts. A part's payload is let go once
        handed out (None): every reader reads a day once (the autoscaling passes too since
        decision 0277), and a month of them held to the refresh's end was 60 MB of serving
        minutes alone at 1,000 GPUs."""
        month = day.replace(day=1)
        if (name, month) not in self._kept:
            window = Period(month.year, month.month).window
            rows = self._read(f"SELECT day, stamp, payload FROM {TABLE} WHERE name = ? AND day >= ? "
                              "AND day < ?", [name, month, window.end.date()])
            self._kept[name, month] = {day: (stamp, bytes(payload)) for day, stamp, payload in rows}
        return self._kept[name, month]

    def _payload(self, name: str, day: date, stamp: str) -> bytes | None:
        """A part handed out before, read again (None when it changed or went meanwhile)."""
        row = self._kept_row(name, day)
        return row[1] if row is not None and row[0] == stamp else None

    def _kept_row(self, name: str, day: date) -> tuple[str, bytes] | None:
        """One part as stored now (the kept statistics of a window, `spanning`)."""
        rows = self._read(f"SELECT stamp, payload FROM {TABLE} WHERE name = ? AND day = ?", [name, day])
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    def _read(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Parts as stored, their blocks not kept in DuckDB's cache after (each is read once by
        a refresh or a report; the cache held 70 MiB of them at 1,000 GPUs, decision 0280)."""
        rows = self.con.execute(sql, params).fetchall()
        release_cached_blocks(self.con)
        return rows

    def through(self, name: str, read: DayRead) -> DayRead:
        """`read`, through these parts under `name` (the query and its SQL's version)."""
        return lambda wh, start, end: self.day(name, wh, start, end, read)

    def prune(self, before: date) -> int:
        """Drop the parts of days before `before` (months no longer kept current); how many
        (0 when that fails: the parts are then not used, see `failure`)."""
        try:
            return int(self.con.execute(f"DELETE FROM {TABLE} WHERE day < ?", [before]).fetchall()[0][0])
        except duckdb.Error as exc:
            self._fail(exc)
            return 0

    def _fail(self, exc: Exception) -> None:
        self.failure = f"{self.path.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def _ranges(days: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Consecutive days as one range: the fewer ranges, the shorter the statement asking for them."""
    merged: list[tuple[datetime, datetime]] = []
    for lo, hi in days:
        if merged and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _ready(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    try:
        con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR, day DATE, stamp VARCHAR, "
                    "payload BLOB, PRIMARY KEY (name, day))")
    except duckdb.Error as exc:
        con.close()
        raise WarehouseError(f"day parts: {str(exc).splitlines()[0]}") from None
    return con
