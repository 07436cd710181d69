"""Day parts: what a per-minute advice query gave for one UTC day, kept beside the serving store.

Why (issue 34 item 1, docs/decisions/0248): `refresh-serving` recomputes a month's results
whenever their basis moves, once an hour for the running month, and the overcommit and
autoscaling advice read the month's per-minute inputs a day at a time (`analytics.advice.run
.by_day`): at 256 GPUs about 0.4 s and 0.7 s a day, 30 days each time, for one new hour. A
day's answer depends only on the SQL and on the rows it reads, so it is kept here under a
content stamp of those rows (`warehouse.queries.advice.per_minute_inputs_stamps`, read from
the fingerprints every write keeps, decision 0274) and read back while the stamp is unchanged:
a refresh queries only the days whose inputs changed (the running day; a day backfilled), and
the month is put together from the parts exactly as a full read puts it together from the
days; the token costs' counters too (`warehouse.queries.workloads.token_increases`). What spans
days (each allocation's statistics over the month) is kept whole with every day's stamp, and
only its rows that reach a changed day are asked again (`DayParts.spanning`, decision 0261).
What a reader takes in passes (the serving minutes, a group of Deployments a pass) is kept cut
into one piece per pass (`DayParts.pieces`, decision 0287): each pass decodes only its own.

The parts live in their own folder (`<warehouse>.dayparts/`), not in the serving store, which
every publish copies whole: a month of serving minutes is tens of MB at 256 GPUs, 664 MB at
10,000. One file per part (`<query>/<day>.daypart`: its stamp, then the frame as zstd Arrow
IPC), written beside and renamed over the old one, so a kill leaves the old part or the new
(decision 0281: the parts were rows of a DuckDB file, whose BLOB reads, replacements and close
took about 15 s of a 10,000-GPU increment). Every reader of the month's per-minute advice uses
them (`refresh-serving`, `report monthly`, `recommend --kind`: `kept_day_parts`), one process at
a time under the parts' own lock, so a report issued after the chart's refreshes reads only the
days that moved since (decision 0254). The folder is a cache: a part that cannot be read back is
read again and replaced, and deleting the folder only costs the next reader the full read.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import shutil
import struct
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import polars as pl

from gpuledger.core.window import DAY, Window, floor_time
from gpuledger.warehouse.pieces import DamagedPieces, Pieces, encoded
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries.advice import per_minute_inputs_stamps

DayRead = Callable[[ReadableWarehouse, datetime, datetime], pl.DataFrame]
Ranges = Sequence[tuple[datetime, datetime]]
SpanRead = Callable[[ReadableWarehouse, datetime, datetime, Ranges], pl.DataFrame]
"""A window's read whose rows span days: `(wh, start, end, touching)` → every row when
`touching` is empty, else (at least) those with a sample in one of the ranges."""
Cut = Callable[[pl.DataFrame, int | None], Sequence[pl.DataFrame]]
"""A day's frame cut into a number of pieces (None: as many as the cutter sizes it for)."""
SUFFIX = ".daypart"
MAGIC = b"gpldayp1"
PIECES_MAGIC = b"gpldayq1"  # a part kept as pieces (`warehouse.pieces`), not one frame
HEAD = struct.Struct("<8sIQ")
"""A part's head: the magic, the stamp's length and the frame's (a part cut short, by a crash
before its blocks reached the disk, is told from a whole one by the lengths)."""
log = logging.getLogger(__name__)
T = TypeVar("T")


class DamagedPart(ValueError):
    """A part file that is not a whole part (its head or its length is wrong)."""


def day_parts_path(warehouse: str | Path) -> Path:
    """The day parts' folder beside the warehouse (`gpuledger.duckdb` → `gpuledger.dayparts`)."""
    path = Path(warehouse)
    return path.with_name(f"{path.stem}.dayparts")


@contextlib.contextmanager
def kept_day_parts(warehouse: str | Path) -> Iterator[DayParts | None]:
    """The day parts of the warehouse at `warehouse`, open for one reader of the month's
    per-minute advice, under the parts' own lock (`<warehouse>.dayparts.lock`, flock, not
    waited for: a second reader reads the month whole rather than queue behind a refresh).
    None, and the month is read whole, for a warehouse that is not a file, parts held by
    another process, or a folder that cannot be made; what failed mid-way is logged on exit."""
    path = day_parts_path(warehouse)
    if not Path(warehouse).is_file():
        yield None
        return
    try:
        lock = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a read-only folder: no parts, the month read whole
        log.info("day parts not used (%s); the month is read whole", exc)
        yield None
        return
    try:
        days = _locked(path, lock)
        if days is None:
            yield None
            return
        with days:
            yield days
        if days.failure is not None:
            log.warning("day parts not kept (%s); those days were read whole", days.failure)
    finally:
        os.close(lock)  # closing the descriptor releases the flock


def _locked(path: Path, lock: int) -> DayParts | None:
    """The parts at `path` once `lock` is held; None (logged) when another process holds it
    or the folder cannot be made."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("day parts %s in use by another process; the month is read whole", path.name)
        return None
    try:
        return DayParts(path)
    except OSError as exc:
        log.warning("day parts not kept (%s); the month is read whole", exc)
        return None


class DayParts:
    """The day parts of one warehouse, open for one reader (a context, as a reader holds them).

    `day(name, wh, start, end, read)` is what a per-day reader calls instead of `read(wh,
    start, end)`: the stored frame when the day's inputs have the stamp it was stored under,
    else `read`'s frame, stored. `reads` counts the days actually queried (for tests and the
    bench). A part that is not whole (`DamagedPart`) is read again and replaced; once reading
    or writing the folder fails (a full disk, a folder made read-only), `failure` says why and
    every later day is read whole without the parts, so the round's results are still
    computed (`kept_day_parts` logs it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        _prepared(self.path)
        self.reads = 0
        self.hits = 0
        self.failure: str | None = None
        self._stamps: dict[tuple[datetime, datetime], str] = {}

    def __enter__(self) -> DayParts:
        return self

    def __exit__(self, *_: object) -> None:
        """Nothing to close: no part is held open, each is a file read or written whole."""

    def day(self, name: str, wh: ReadableWarehouse, start: datetime, end: datetime,
            read: DayRead) -> pl.DataFrame:
        """`read(wh, start, end)` for the UTC day `[start, end)`, from the parts when its inputs
        are unchanged. A part is kept only for a whole day (a window's partial edge day is read)."""
        if self.failure is not None or not _whole_day(start, end):
            self.reads += 1
            return read(wh, start, end)
        stamp = self._stamp(wh, start, end)
        kept = self._kept(name, start.date(), lambda found: found == stamp)
        if kept is not None:
            self.hits += 1
            return kept[1]
        self.reads += 1
        frame = read(wh, start, end)
        self._store(name, start.date(), stamp, frame)
        return frame

    def expect(self, wh: ReadableWarehouse, window: Window) -> None:
        """Stamp every whole UTC day of `window` at once, before a reader of the window asks for
        them a day at a time: one statement for all the days (`per_minute_inputs_stamps`),
        not one a day."""
        self._stamps_of(wh, [(day.start, day.end) for day in window.days() if _whole_day(day.start, day.end)])

    def pieces(self, name: str, wh: ReadableWarehouse, start: datetime, end: datetime, read: DayRead, *,
               cut: Cut, count: int | None) -> Pieces | None:
        """`read(wh, start, end)` for the UTC day `[start, end)` cut by `cut` into `count`
        pieces (as many as `cut` sizes when None), kept as one part (decision 0287): a reader
        in passes decodes only its own piece of each day. A kept part with unchanged inputs is
        used when it has `count` pieces (any, when None), else cut again from its own pieces,
        not queried. None (counted in `reads`) for a day not kept (a window's partial edge day)
        or parts that failed: the caller reads the day. A failed write gives pieces in memory."""
        if self.failure is not None or not _whole_day(start, end):
            self.reads += 1
            return None
        stamp = self._stamp(wh, start, end)
        kept = self._kept_pieces(name, start.date(), stamp)
        if kept is not None and count in (None, kept.count):
            self.hits += 1
            return kept
        if kept is not None:  # kept for another number of passes
            self.hits += 1
            frame = kept.whole()
        else:
            self.reads += 1
            frame = read(wh, start, end)
        payload = encoded(cut(frame, count), "zstd")
        written = self._write(name, start.date(), stamp, payload, PIECES_MAGIC)
        in_memory = Pieces.of(payload)
        if written is None:
            return in_memory
        path, base = written
        return Pieces(path, tuple((base + offset, size) for offset, size in in_memory.at))

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
        found = self._kept(key, start.date(), lambda _: True)
        kept_stamps, kept = (json.loads(found[0]), found[1]) if found is not None else ({}, None)
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

    def _file(self, name: str, day: date) -> Path:
        """Where the part of query `name` (its SQL's version: any text) for `day` is kept."""
        return self.path / quote(name, safe="") / f"{day.isoformat()}{SUFFIX}"

    def _kept(self, name: str, day: date, wanted: Callable[[str], bool]) -> tuple[str, pl.DataFrame] | None:
        """The part of `name` for `day` (its stamp and frame) when its stamp is `wanted`."""

        def frame(part: io.BufferedReader, path: Path, size: int) -> pl.DataFrame:
            payload = part.read(size + 1)
            if len(payload) != size:
                raise DamagedPart(f"{path.name}: {len(payload)} bytes of a {size}-byte frame")
            return pl.read_ipc(io.BytesIO(payload))

        return self._opened(name, day, MAGIC, wanted, frame)

    def _kept_pieces(self, name: str, day: date, stamp: str) -> Pieces | None:
        """The part of `name` for `day` kept as pieces under `stamp`: its index read and checked
        against the file's length, no piece decoded yet."""

        def pieces(part: io.BufferedReader, path: Path, size: int) -> Pieces:
            offset = part.tell()
            if os.fstat(part.fileno()).st_size != offset + size:
                raise DamagedPart(f"{path.name}: not the {size}-byte payload its head gives")
            return Pieces.read(path, offset, size)

        found = self._opened(name, day, PIECES_MAGIC, lambda found: found == stamp, pieces)
        return found[1] if found is not None else None

    def _opened(self, name: str, day: date, magic: bytes, wanted: Callable[[str], bool],
                body: Callable[[io.BufferedReader, Path, int], T]) -> tuple[str, T] | None:
        """`body(file, path, size)` of the part of `name` for `day` once its head (`magic`) is
        read, when its stamp is `wanted` (the payload is read only then); None for no part, an
        unwanted one, or one not whole (removed: it is read again and replaced) or unreadable
        (the parts end, `failure`)."""
        if self.failure is not None:
            return None
        path = self._file(name, day)
        try:
            with path.open("rb") as part:
                stamp, size = _head(part, magic)
                if not wanted(stamp):
                    return None
                return stamp, body(part, path, size)
        except FileNotFoundError:
            return None
        except (DamagedPart, DamagedPieces, pl.exceptions.PolarsError, UnicodeDecodeError) as exc:
            log.info("day part %s/%s not whole (%s): read again", path.parent.name, path.name, exc)
            path.unlink(missing_ok=True)
            return None
        except OSError as exc:
            self._fail(exc)
            return None

    def _store(self, name: str, day: date, stamp: str, frame: pl.DataFrame) -> None:
        """Keep `frame` under (`name`, `day`) with `stamp` (`_write`), as zstd Arrow IPC."""
        buffer = io.BytesIO()
        frame.write_ipc(buffer, compression="zstd")
        self._write(name, day, stamp, buffer.getbuffer(), MAGIC)

    def _write(self, name: str, day: date, stamp: str, payload: bytes | memoryview,
               magic: bytes) -> tuple[Path, int] | None:
        """Keep `payload` under (`name`, `day`) with `stamp`, headed by `magic`, written beside
        the part's file and renamed over it (a kill keeps the old part or the new); where the
        payload starts in the file, or None on a failure (`failure`). Not synced: a part a crash
        cut short is told by its lengths (`_opened`) and read again, as a cache may be."""
        if self.failure is not None:
            return None
        target = self._file(name, day)
        fresh = target.with_name(target.name + ".tmp")
        encoded_stamp = stamp.encode()
        try:
            target.parent.mkdir(exist_ok=True)
            with fresh.open("wb") as out:
                out.write(HEAD.pack(magic, len(encoded_stamp), len(payload)))
                out.write(encoded_stamp)
                out.write(payload)
            fresh.replace(target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                fresh.unlink(missing_ok=True)
            self._fail(exc)
            return None
        return target, HEAD.size + len(encoded_stamp)

    def through(self, name: str, read: DayRead) -> DayRead:
        """`read`, through these parts under `name` (the query and its SQL's version)."""
        return lambda wh, start, end: self.day(name, wh, start, end, read)

    def prune(self, before: date) -> int:
        """Drop the parts of days before `before` (months no longer kept current); how many
        (0 when that fails: the parts are then not used, see `failure`)."""
        if self.failure is not None:
            return 0
        dropped = 0
        try:
            for part in self.path.glob(f"*/*{SUFFIX}"):
                if date.fromisoformat(part.name.removesuffix(SUFFIX)) < before:
                    part.unlink()
                    dropped += 1
        except (OSError, ValueError) as exc:
            self._fail(exc)
        return dropped

    def _fail(self, exc: Exception) -> None:
        self.failure = f"{self.path.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def _whole_day(start: datetime, end: datetime) -> bool:
    """Whether `[start, end)` is a whole UTC day (a window's partial edge day is not kept)."""
    return end - start == DAY and floor_time(start, DAY) == start


def _head(part: io.BufferedReader, magic: bytes) -> tuple[str, int]:
    """A part's stamp and its payload's length in bytes, from its head (`magic`: the kind of
    part the reader expects)."""
    head = part.read(HEAD.size)
    if len(head) != HEAD.size:
        raise DamagedPart("no head")
    found, stamp_size, size = HEAD.unpack(head)
    if found != magic:
        raise DamagedPart("not a day part of this kind")
    stamp = part.read(stamp_size)
    if len(stamp) != stamp_size:
        raise DamagedPart("a stamp cut short")
    return stamp.decode(), size


def _ranges(days: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Consecutive days as one range: the fewer ranges, the shorter the statement asking for them."""
    merged: list[tuple[datetime, datetime]] = []
    for lo, hi in days:
        if merged and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _prepared(path: Path) -> None:
    """The parts' folder, made when new: then the DuckDB file of parts an earlier release kept
    there (`<warehouse>.dayparts.duckdb`, decision 0248, up to 1.5 GB at 10,000 GPUs) is
    removed, a cache no reader will read again. A part a kill left half-written (`*.tmp`) is
    removed too: the caller holds the parts' lock, so no other process is writing one."""
    if not path.is_dir():
        path.mkdir()
        for legacy in (path.with_name(path.name + ".duckdb"), path.with_name(path.name + ".duckdb.wal")):
            legacy.unlink(missing_ok=True)
        shutil.rmtree(path.with_name(path.name + ".duckdb.tmp"), ignore_errors=True)
    for half in path.glob(f"*/*{SUFFIX}.tmp"):
        with contextlib.suppress(OSError):  # one that cannot go fails its write later, as any would
            half.unlink(missing_ok=True)
