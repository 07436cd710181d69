"""A month of serving minutes, handed to the autoscaling replay one Deployment at a time, in as
many passes as keep the minutes held at once under a bound, each day read once.

Why (issue 34, docs/decisions/0269, 0277): each Deployment is replayed from its whole month
(step 2's hourly 5th percentiles and the replay itself run over the month), and the minutes
arrive a UTC day at a time, every Deployment in each day. Holding the month until the last day
is read held every Deployment's minutes at once: about 330 MB at 1,000 GPUs and about ten times
that at 10,000 GPUs. So the Deployments are split by a stable hash of their names into `passes`
groups. The days are read once: the first pass keeps its group's minutes and sets the others'
aside, compressed in a temporary file (`SetAside`); each later pass reads its group back from
there, replays it and drops it. Reading every day again per pass (0269) decoded a 10,000-GPU
month's kept days seven times (12.5 s of 34 s, with the days' grouping 8 s more); setting the
minutes aside costs an encoding (0.11-0.14 s a 10,000-GPU day) and one decoding of each group.
The first pass learns what the month needs of every Deployment (GPUs per replica, the models
served).
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
from typing import IO, TypeVar

import numpy as np
import polars as pl

from gpuledger.analytics.advice.autoscaling import SERIES_SCHEMA
from gpuledger.core.mig import canonical_model
from gpuledger.core.window import Window

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
Key = tuple[str, str]
T = TypeVar("T")


@dataclass
class ServingMonth:
    """The serving minutes of `window`, read a UTC day at a time by `read(day)` (the day's frame
    sorted by namespace, deployment, ts; `warehouse.queries.advice.serving_minutes`), each day
    once."""

    read: Callable[[Window], pl.DataFrame]
    window: Window
    widest: dict[Key, int] = field(default_factory=dict)
    """Per Deployment, the most GPUs per replica seen in the month (complete once a first
    Deployment is handed out)."""
    models: set[str] = field(default_factory=set)
    """The models served in the month (canonical names; complete as `widest`)."""
    passes: int = 1
    """How many passes the month takes (known once the first day with minutes is read)."""

    def deployments(self) -> Iterator[tuple[Key, pl.DataFrame]]:
        """Each Deployment's month of minutes (`REPLAY_COLUMNS`, by ts), in name order within a
        pass; every Deployment once."""
        held: dict[Key, list[pl.DataFrame]] = {}
        sized = False
        with tempfile.TemporaryFile(prefix="gpuledger-serving-minutes-") as spill:
            aside = SetAside(spill)
            # the next day read (decoded, or queried where it changed) on a thread of its own while
            # this one is held: one read at a time, and nothing here queries meanwhile (the
            # warehouse's connection serves one thread at a time, `Warehouse.reader`)
            reads = (partial(self.read, day) for day in self.window.days())
            for part in in_threads(reads, workers=1, ahead=1):
                runs = _runs(part, pl.col("gpus_per_replica").max())
                self._learn(part, runs)
                if part.is_empty():
                    continue
                if not sized:
                    self.passes, sized = self._passes_for(part, runs.height), True
                self._hold(part, runs, held, aside)
            yield from _handed(held)
            for batch in range(1, self.passes):
                held = {}
                for part in aside.take(batch):
                    self._hold(part, _runs(part), held, None)
                yield from _handed(held)

    def _learn(self, part: pl.DataFrame, runs: pl.DataFrame) -> None:
        """The month's facts from a day of every Deployment (the first pass reads every day);
        `runs`: the day's Deployments in order, their minutes and most GPUs per replica."""
        self.models |= {canonical_model(str(m)) for m in part["model"].drop_nulls().unique()}
        for ns, dep, _, found in runs.iter_rows():
            key = (str(ns), str(dep))
            if found is not None and int(found) > self.widest.get(key, 0):
                self.widest[key] = int(found)

    def _passes_for(self, part: pl.DataFrame, deployments: int) -> int:
        """How many passes keep a pass's minutes under `REPLAY_BUDGET`, were every day of the
        window as large as `part` (of `deployments`: no more passes than that)."""
        month = part.select(REPLAY_COLUMNS).estimated_size() * len(list(self.window.days()))
        return max(1, min(deployments, math.ceil(month / REPLAY_BUDGET)))

    def _hold(self, part: pl.DataFrame, runs: pl.DataFrame, held: dict[Key, list[pl.DataFrame]],
              aside: SetAside | None) -> None:
        """Keep the minutes of `part` (its Deployments' `runs`) by Deployment: with one pass,
        slices of a compact copy of the day's replay columns; with no `aside` (a later pass
        reading back its own group, decoded afresh), slices of them; else the first group's
        rows copied out, and every other group's set aside in `aside` for its pass.

        A copy of a day read, not views of it: a day read from DuckDB holds its Arrow buffers as
        DuckDB grew them, with the columns not kept beside them; views of a 1,000-GPU day held
        ~30 MB for its 14 MB of replay columns, ~430 MB more over the month at a full refresh's
        peak (decision 0286). The copy is ~10 ms a day."""
        keys = [(str(ns), str(dep)) for ns, dep in runs.select(KEY_COLUMNS).iter_rows()]
        lengths = runs["len"].to_numpy()
        replay = part.select(REPLAY_COLUMNS)
        if aside is not None and self.passes == 1:
            replay = replay.shrink_to_fit()
        elif aside is not None:
            groups = np.fromiter((pass_of(key, self.passes) for key in keys), np.int64, len(keys))
            rows = pl.Series(np.repeat(groups, lengths))
            for batch in range(1, self.passes):
                aside.put(batch, part.filter(rows == batch).select(*KEY_COLUMNS, *REPLAY_COLUMNS))
            mine = groups == 0
            replay = replay.filter(rows == 0)
            keys, lengths = [k for k, m in zip(keys, mine, strict=True) if m], lengths[mine]
        offset = 0
        for key, length in zip(keys, lengths.tolist(), strict=True):
            held.setdefault(key, []).append(replay.slice(offset, length))
            offset += length


@dataclass
class SetAside:
    """The minutes of the passes after the first, written once as the days are read (Arrow IPC,
    LZ4: about 30 MB a 10,000-GPU day; zstd's fifth smaller took twice as long to write) to
    `file`, an unnamed temporary file, so they wait on disk, not in memory (the chart's jobs
    mount an `emptyDir` at /tmp), and read back a pass at a time."""

    file: IO[bytes]
    pieces: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def put(self, batch: int, frame: pl.DataFrame) -> None:
        """Set `frame` aside for pass `batch`."""
        if frame.is_empty():
            return
        buffer = io.BytesIO()
        frame.write_ipc(buffer, compression="lz4")
        start = self.file.seek(0, io.SEEK_END)
        self.file.write(buffer.getbuffer())
        self.pieces.setdefault(batch, []).append((start, buffer.tell()))

    def take(self, batch: int) -> Iterator[pl.DataFrame]:
        """The frames set aside for pass `batch`, in the order they were put."""
        for start, size in self.pieces.pop(batch, []):
            self.file.seek(start)
            yield pl.read_ipc(io.BytesIO(self.file.read(size)))


def _runs(part: pl.DataFrame, *also: pl.Expr) -> pl.DataFrame:
    """The Deployments of `part` (sorted by them) in order: their minutes (`len`) and `also`."""
    return part.group_by(KEY_COLUMNS, maintain_order=True).agg(pl.len(), *also)


def _handed(held: dict[Key, list[pl.DataFrame]]) -> Iterator[tuple[Key, pl.DataFrame]]:
    """Each Deployment's frames of `held` as one, in name order, dropped as handed out."""
    for key in sorted(held):
        yield key, pl.concat(held.pop(key), how="vertical_relaxed")


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
