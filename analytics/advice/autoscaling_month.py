"""A month of serving minutes, handed to the autoscaling replay one Deployment at a time, in as
many passes as keep the minutes held at once under a bound, each day read once.

Why (issue 34, docs/decisions/0269, 0277, 0287): each Deployment is replayed from its whole
month (step 2's hourly 5th percentiles and the replay itself run over the month), and the
minutes arrive a UTC day at a time, every Deployment in each day. Holding the month until the
last day is read held every Deployment's minutes at once: about 330 MB at 1,000 GPUs and about
ten times that at 10,000 GPUs. So the Deployments are split by a stable hash of their names into
`passes` groups, and each day's minutes are cut once into one piece per pass (`cut`). A day
whose part is kept (`warehouse.day_parts.DayParts.pieces`) keeps its pieces there, so each pass
decodes only its own piece of it; a day read whole (a window's partial edge day, or no parts)
is cut as it is read and its later pieces wait compressed in a temporary file (`set_aside`).
Reading every day whole again per pass (0269) decoded a 10,000-GPU month's kept days seven
times; setting the later groups aside on every refresh (0277) encoded and decoded six sevenths
of the month again each time, ~9 CPU-s of a 10,000-GPU increment. A Deployment's pass learns
what the month needs of it (its GPUs per replica) before handing it out; the models served are
known once every pass is done (the price applies then: `analytics.advice.run`).
"""

from __future__ import annotations

import io
import math
import tempfile
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Protocol, TypeVar

import numpy as np
import polars as pl

from gpuledger.analytics.advice.autoscaling import SERIES_SCHEMA
from gpuledger.analytics.advice.autoscaling_replay import Floats, Ints
from gpuledger.core.mig import canonical_model
from gpuledger.core.window import Window
from gpuledger.warehouse.pieces import Pieces, encoded

REPLAY_BUDGET = 512 * 2**20
"""The most bytes of replay minutes (`REPLAY_COLUMNS`) held at once, estimated from the first
day with minutes. A 1,000-GPU month (about 330 MB) stays one pass; a 10,000-GPU month (about
3.5 GB) takes seven (bench/results/autoscaling_month_passes.json)."""
REPLAY_THREADS = 2
"""How many Deployments are replayed at once (`in_threads`). Two: the chart's jobs ask for two
cores, and numpy lets the GIL go inside each array operation of a replay (a Deployment-month is
43,200 minutes), so two replays overlap most of their work (1.3x by hand on the 10,000-GPU
month's Deployments); the Python between the operations holds it, so more threads than cores
only wait."""
KEY_COLUMNS = ["namespace", "deployment"]
REPLAY_COLUMNS = [c for c in SERIES_SCHEMA if c not in KEY_COLUMNS]
MONTH_COLUMNS = [*REPLAY_COLUMNS, "gpus_per_replica", "model"]
"""What the month reads of a day's minutes: the replay's columns and what it learns (`widest`,
`models`)."""
Key = tuple[str, str]
T = TypeVar("T")


Cut = Callable[[pl.DataFrame, int | None], list[pl.DataFrame]]
"""A day's minutes cut into a number of pieces (None: as many as the reader's passes would be,
sized from the day)."""
Keep = Callable[[Window, int | None, Cut], Pieces | None]
"""A whole UTC day's serving minutes kept as pieces, one per pass (`warehouse.day_parts.DayParts
.pieces`): `keep(day, count, cut)` gives them cut into `count` pieces (any count kept when None;
a day read then is cut as `cut` sizes it), or None where the day is not kept (the caller reads
it)."""


class DayPieces(Protocol):
    """A day's minutes in pieces, one per pass: `warehouse.pieces.Pieces` or `_Held`."""

    def take(self, piece: int) -> pl.DataFrame:
        """Pass `piece`'s minutes of the day."""


@dataclass
class ServingMonth:
    """The serving minutes of `window`, read a UTC day at a time by `read(day)` (the day's frame
    sorted by namespace, deployment, ts; `warehouse.queries.advice.serving_minutes`), or kept
    cut into one piece per pass by `keep` (decision 0287); each day read once."""

    read: Callable[[Window], pl.DataFrame]
    window: Window
    keep: Keep | None = None
    widest: dict[Key, int] = field(default_factory=dict)
    """Per Deployment, the most GPUs per replica seen in the month (complete for a Deployment
    when it is handed out: its pass has read every day)."""
    models: set[str] = field(default_factory=set)
    """The models served in the month (canonical names; complete once every Deployment is)."""
    passes: int = 1
    """How many passes the month takes (known once the first day with minutes is read)."""

    def deployments(self) -> Iterator[tuple[Key, list[pl.DataFrame]]]:
        """Each Deployment's month of minutes (`REPLAY_COLUMNS`, its days' frames in order), in
        name order within a pass; every Deployment once.

        Each pass reads its piece of every day: a kept day's from its part (only that piece is
        decoded), a day not kept read whole once, in the first pass, and cut, its later pieces
        waiting compressed in a temporary file (`set_aside`) when there are several passes."""
        days = list(self.window.days())
        with tempfile.TemporaryFile(prefix="gpuledger-serving-minutes-") as spill:
            first = self._sized(days, spill)
            if first is None:
                return
            sources: dict[int, DayPieces] = {first[0]: first[1]}

            def piece(day: int, batch: int) -> tuple[int, pl.DataFrame]:
                if day not in sources:  # on the read-ahead thread, in the days' order
                    sources[day] = self._source(days[day], spill)
                return batch, sources[day].take(batch)

            # the next piece read (decoded, or queried where the day changed) on a thread of its
            # own while this one is held: one read at a time, and nothing here queries meanwhile
            # (the warehouse's connection serves one thread at a time, `Warehouse.reader`)
            reads = (partial(piece, day, batch) for batch in range(self.passes)
                     for day in range(first[0], len(days)))
            held: dict[Key, list[pl.DataFrame]] = {}
            current = 0
            for batch, part in in_threads(reads, workers=1, ahead=1):
                if batch != current:
                    yield from _handed(held)
                    current = batch
                if part.is_empty():
                    continue
                runs = _Runs.of(part)
                self._learn(part, runs)
                _hold(part, runs, held, compact=self.passes == 1)
            yield from _handed(held)

    def _sized(self, days: list[Window], spill: IO[bytes]) -> tuple[int, DayPieces] | None:
        """The first day with minutes (None when no day has any) and its pieces, the month's
        `passes` sized from it. A day read here is cut as it is read (a kept one as the passes
        want it), not read again; a kept day's pieces of another count are cut again."""
        for index, day in enumerate(days):
            kept = self.keep(day, None, self._cut) if self.keep is not None else None
            frame = kept.whole() if kept is not None else self.read(day)
            if frame.is_empty():
                continue
            self.passes = self._passes_for(frame)
            if kept is None:
                return index, self._cut_aside(frame, spill)
            return index, kept if kept.count == self.passes else self._source(day, spill)
        return None

    def _source(self, day: Window, spill: IO[bytes]) -> DayPieces:
        """`day`'s pieces: kept ones, or the day read whole and cut."""
        kept = self.keep(day, self.passes, self._cut) if self.keep is not None else None
        return kept if kept is not None else self._cut_aside(self.read(day), spill)

    def _cut(self, frame: pl.DataFrame, count: int | None) -> list[pl.DataFrame]:
        """`cut`, into as many pieces as the month's passes sized from `frame` when no count is
        given (a day first read for the sizing)."""
        return cut(frame, count if count is not None else self._passes_for(frame))

    def _cut_aside(self, frame: pl.DataFrame, spill: IO[bytes]) -> DayPieces:
        """A day read whole, cut into the passes' pieces: held as they are with one pass, else
        set aside compressed until their pass takes them."""
        if self.passes == 1:
            pieces: list[pl.DataFrame | None] = [*cut(frame, 1)]
            return _Held(pieces)
        return set_aside(spill, cut(frame, self.passes))

    def _learn(self, part: pl.DataFrame, runs: _Runs) -> None:
        """The month's facts from a pass's piece of a day (its Deployments' `runs`)."""
        self.models |= {canonical_model(str(m)) for m in part["model"].drop_nulls().unique()}
        for key, found in zip(runs.keys, runs.widest().tolist(), strict=True):
            if not math.isnan(found) and int(found) > self.widest.get(key, 0):
                self.widest[key] = int(found)

    def _passes_for(self, part: pl.DataFrame) -> int:
        """How many passes keep a pass's minutes under `REPLAY_BUDGET`, were every day of the
        window as large as `part` (no more passes than its Deployments)."""
        deployments = len(_Runs.of(part).keys)
        month = part.select(REPLAY_COLUMNS).estimated_size() * len(list(self.window.days()))
        return max(1, min(deployments, math.ceil(month / REPLAY_BUDGET)))


def cut(frame: pl.DataFrame, count: int) -> list[pl.DataFrame]:
    """A day's serving minutes (sorted by Deployment) cut into `count` pieces by `pass_of` of
    each Deployment, each piece sorted as the day was; only what the month reads of them
    (`MONTH_COLUMNS`). What `DayParts.pieces` keeps (decision 0287)."""
    frame = frame.select(*KEY_COLUMNS, *MONTH_COLUMNS)
    if count == 1:
        return [frame]
    runs = _Runs.of(frame)
    groups = np.fromiter((pass_of(key, count) for key in runs.keys), np.int64, len(runs.keys))
    rows = pl.Series(np.repeat(groups, runs.lengths))
    return [frame.filter(rows == batch) for batch in range(count)]


def _hold(part: pl.DataFrame, runs: _Runs, held: dict[Key, list[pl.DataFrame]], *,
          compact: bool) -> None:
    """Keep the replay columns of `part` (a pass's piece of a day: its Deployments' `runs`) by
    Deployment, as slices of the piece; of a compact copy of them when `compact` (one pass).

    A copy with one pass, not views of the day read: a day read from DuckDB holds its Arrow
    buffers as DuckDB grew them, with the columns not kept beside them; views of a 1,000-GPU
    day held ~30 MB for its 14 MB of replay columns, ~430 MB more over the month at a full
    refresh's peak (decision 0286). The copy is ~10 ms a day. With several passes (10,000
    GPUs) a piece is decoded afresh from its part or the set-aside file, and not copied again."""
    replay = part.select(REPLAY_COLUMNS)
    if compact:
        replay = replay.shrink_to_fit()
    for key, start, length in zip(runs.keys, runs.starts.tolist(), runs.lengths.tolist(), strict=True):
        held.setdefault(key, []).append(replay.slice(start, length))


@dataclass
class _Held:
    """A day's pieces held in memory, each handed out once (its pass's minutes are then held
    by Deployment, not twice)."""

    frames: list[pl.DataFrame | None]

    def take(self, piece: int) -> pl.DataFrame:
        frame, self.frames[piece] = self.frames[piece], None
        assert frame is not None, "each piece is taken once"
        return frame


def set_aside(spill: IO[bytes], frames: list[pl.DataFrame]) -> Pieces:
    """`frames` (a day read whole, cut for the passes) set aside in `spill`, an unnamed
    temporary file, as pieces read back a pass at a time: they wait on disk, not in memory (the
    chart's jobs mount an `emptyDir` at /tmp). Arrow IPC, LZ4: about 30 MB a 10,000-GPU day;
    zstd's fifth smaller took twice as long to write."""
    payload = encoded(frames, "lz4")
    start = spill.seek(0, io.SEEK_END)
    spill.write(payload)
    return Pieces.read(spill, start, len(payload))


@dataclass(frozen=True)
class _Runs:
    """The Deployments of a day's minutes (sorted by them) in order: their keys, and where each
    one's rows start and how many there are.

    From the names' categorical codes with numpy: a `group_by(..., maintain_order=True)` of a
    10,000-GPU day (2.5 M rows) took ~60-100 ms, ~3 s of the month's passes on the thread that
    holds the minutes; the change points of the codes take a tenth of that."""

    part: pl.DataFrame
    keys: list[Key]
    starts: Ints
    lengths: Ints

    @classmethod
    def of(cls, part: pl.DataFrame) -> _Runs:
        if part.is_empty():
            return cls(part, [], np.zeros(0, np.int64), np.zeros(0, np.int64))
        names = [part[column].to_physical().to_numpy() for column in KEY_COLUMNS]
        change = np.zeros(part.height, dtype=bool)
        change[0] = True
        for codes in names:
            change[1:] |= codes[1:] != codes[:-1]
        starts = np.flatnonzero(change)
        keys = [(str(ns), str(dep)) for ns, dep in part.select(KEY_COLUMNS)[starts].iter_rows()]
        return cls(part, keys, starts, np.diff(np.append(starts, part.height)))

    def widest(self) -> Floats:
        """Each Deployment's most GPUs per replica in the part (NaN where none is known)."""
        if not self.keys:
            return np.zeros(0)
        gpus = self.part["gpus_per_replica"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        return np.fmax.reduceat(gpus, self.starts)


def _handed(held: dict[Key, list[pl.DataFrame]]) -> Iterator[tuple[Key, list[pl.DataFrame]]]:
    """Each Deployment's days of `held`, in name order, dropped as handed out: joined on the
    replay's own thread (`autoscaling._Minutes.of`), not here on the thread that reads the month
    (the `pl.concat` of a 10,000-GPU month's Deployments took ~3.8 s of it)."""
    for key in sorted(held):
        yield key, held.pop(key)


def pass_of(key: Key, passes: int) -> int:
    """The pass that replays Deployment `key`: a hash stable across processes and days (CRC-32
    of its namespace and name), so a Deployment's days all land in one pass."""
    return zlib.crc32("\0".join(key).encode()) % passes


def in_threads(calls: Iterable[Callable[[], T]], workers: int = REPLAY_THREADS,
               ahead: int | None = None) -> Iterator[T]:
    """Each of `calls` called on `workers` threads, the results in the calls' order; at most
    `ahead` calls (twice `workers` unless given) taken beyond the one handed out, so what is
    held at once stays a few Deployments or days (`calls` is read as results are taken: the
    month's later passes are read meanwhile)."""
    ahead = 2 * workers if ahead is None else ahead
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpuledger-month") as pool:
        pending: deque[Future[T]] = deque()
        for call in calls:
            pending.append(pool.submit(call))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
