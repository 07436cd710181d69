"""Compositions of stages that more than one command runs (the roof wires, stages work).

- `load_simulation`: a simulated fleet's inventory and samples into the warehouse, a day per
  transaction (so a kill loses at most the day in flight, and re-running is safe);
- `rollup`: derive the hourly card-hour roll-up and allocation intervals for a window, a day
  per transaction, in order (the roll-up watermark only moves forward);
- `load_and_rollup`: both at once, the way `gpuledger demo` runs them (docs/decisions/0130):
  a producer thread simulates day d+1 while this thread, the one writer, loads day d and rolls
  up day d-1 (whose read margin day d now covers). The simulator's numpy/polars work and
  DuckDB's statements release the GIL, so the month costs about the larger of the two sides,
  not their sum; the stored rows are the same as `load_simulation` then `rollup` (test).
  The producer also checks each day's batch and converts it to Arrow (`warehouse.prepare`),
  and a third thread parses the DRA pool's object history, which the writer loads before the
  first roll-up (the roll-up reads the DRA cards and claims): the writer's turn is SQL only
  (docs/decisions/0136); each day's roll-up is computed on a pool thread through a second,
  reading connection while the writer loads the next day, and stored by the writer in order.
  A caller may also read each day as soon as it is stored (`each_day`, on a thread and a
  connection of its own: the demo keeps the day's advice inputs in the day parts, decision 0258).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.terminal_progress import Progress
from gpuledger.warehouse.queries import freshness

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.simulator.dra_fleet import DraFleet
    from gpuledger.simulator.engine import Simulation
    from gpuledger.warehouse import LoadBatch, Warehouse

    Days = Iterator[tuple[Window, dict[str, pl.DataFrame]]]
    Batches = Iterator[tuple[Window, LoadBatch]]
    DayTask = Callable[[Warehouse, Window], None]

SIMULATOR_SOURCE = freshness.SIMULATOR_SOURCE
DAY = timedelta(days=1)
AHEAD = 1
"""Days (chunks) the producer makes before the writer takes them: it makes the next while the
writer stores one, then waits for the writer to take it, so at most two are held; each is ~155
MB at 256 GPUs (~1 M rows in polars and Arrow). The producer makes a day about five times faster
than the writer stores it, so a day more ahead only held memory (decisions 0275, 0285)."""
HAND_BACK_DAYS = 7
"""`load_and_rollup` hands DuckDB's cached blocks back every this many days (decision 0285):
the load reads each block about once (the roll-up and the day's task read the day just stored),
yet DuckDB keeps every block until its bound is full, ~12 MB a day at 256 GPUs (~390 MB by the
month's end). A week keeps the cache under ~140 MB; each hand-back waits for the day's task."""


def load_inventory(wh: Warehouse, sim: Simulation, dra: DraFleet | None = None) -> int:
    """The simulated inventory (and the DRA pool's objects, through the collector's parser,
    as a collector listing every 10 minutes would have stored them); returns rows."""
    from gpuledger.warehouse import LoadBatch

    rows = wh.load(LoadBatch(sim.inventory())).total_rows
    if dra is not None:
        rows += wh.load(dra_inventory(dra)).total_rows
    return rows


def dra_inventory(dra: DraFleet) -> LoadBatch:
    """The DRA pool's objects as a collector listing them every 10 minutes would have stored
    them (through the collector's parser), checked and ready to load (`warehouse.prepare`)."""
    from gpuledger.collectors.dra import DraObjects, frames_from_history
    from gpuledger.warehouse import LoadBatch, prepare

    objects = frames_from_history((at, DraObjects(**o)) for at, o in dra.snapshots())
    return prepare(LoadBatch({**objects, "namespaces": dra.namespaces()}))


def simulated_days(sim: Simulation, dra: DraFleet | None = None, chunk: timedelta = DAY) -> Days:
    """Each day's (each `chunk`'s) sample frames, the DRA pool's GPU samples stacked under the
    fleet's."""
    import polars as pl

    for window, simulated in sim.batches(chunk=chunk):
        frames = dict(simulated)
        if dra is not None:
            samples = [frames["gpu_samples"], dra.gpu_samples(window)]
            frames["gpu_samples"] = pl.concat(samples, how="vertical_relaxed")
        yield window, frames


def prepared_days(days: Days) -> Batches:
    """Each day as the `LoadBatch` the writer stores, already checked and in Arrow."""
    from gpuledger.warehouse import LoadBatch, prepare

    for window, frames in days:
        yield window, prepare(LoadBatch(frames, window, {SIMULATOR_SOURCE: window.end}))


def load_simulation(wh: Warehouse, sim: Simulation, *, label: str = "simulate + load",
                    dra: DraFleet | None = None, chunk: timedelta = DAY) -> int:
    """Load inventory, then each day's samples with the `simulator` watermark; returns rows.

    With `dra`, the DRA pool too: its objects and its samples in the same day batches.
    A shorter `chunk` (an hour) bounds memory where a day's frames would not fit (10,000 GPUs:
    ~24 M sample rows, ~4.6 GB a day); the stored rows are the same (the simulator is
    chunk-invariant, `tests/simulator/test_determinism.py`). The next chunks are simulated on
    a thread while this one is stored (`AHEAD` of them at most)."""
    rows = load_inventory(wh, sim, dra)
    with Progress(label, total=len(list(sim.window.split(chunk)))) as progress, \
            _Producer(prepared_days(simulated_days(sim, dra, chunk))) as batches:
        for _, batch in batches:
            rows += wh.load(batch).total_rows
            progress.advance(note=f"{rows:,} rows")
    return rows


def rollup(wh: Warehouse, window: Window, settings: Settings, *, label: str = "roll-up") -> int:
    """Store `card_hours_hourly` and `allocations` for `window`, one UTC day at a time."""
    from gpuledger.analytics.usage.rollup import rollup_batch

    rows = 0
    days = list(window.days())
    with Progress(label, total=len(days)) as progress:
        for day in days:
            rows += wh.load(rollup_batch(wh, day, settings)).total_rows
            progress.advance()
    return rows


class _Producer:
    """`prepared_days` on a thread, at most `AHEAD` made and not yet taken; its error re-raised
    here. A permit per day wanted, not a bounded queue: a queue's producer makes its next day
    before it blocks on the full queue, one more held than the queue's size."""

    _END = object()

    def __init__(self, days: Batches) -> None:
        self._days = days
        self._queue: queue.Queue[object] = queue.Queue()  # bounded by the permits
        self._wanted = threading.Semaphore(AHEAD)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="simulate", daemon=True)

    def __enter__(self) -> _Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # the writer failed or finished: make no more days
        self._thread.join()

    def _run(self) -> None:
        try:
            while self._permitted() and (item := next(self._days, None)) is not None:
                self._queue.put(item)
        except BaseException as exc:  # handed to the writer thread, which raises it
            self._error = exc
        self._queue.put(self._END)

    def _permitted(self) -> bool:
        """Wait until the writer wants another day; False once it has stopped."""
        while not self._stop.is_set():
            if self._wanted.acquire(timeout=0.1):
                return True
        return False

    def __iter__(self) -> Batches:
        while (item := self._queue.get()) is not self._END:
            self._wanted.release()  # this one taken: the producer may make the next
            yield item  # type: ignore[misc]
        if self._error is not None:
            raise self._error


def load_and_rollup(wh: Warehouse, sim: Simulation, settings: Settings, *,
                    dra: DraFleet | None = None, label: str = "simulate + load + roll-up",
                    each_day: DayTask | None = None) -> int:
    """`load_simulation` then `rollup` over the simulation's window, overlapped (module
    docstring); returns the rows loaded. Each day's roll-up is computed once the next day is
    loaded, when its read margin (`SamplingRules.margin`, minutes) is in the warehouse.
    `each_day(reader, day)`: a read of each day once it is loaded (the demo keeps the day's
    advice inputs, `analytics.advice.run.keep_day`), in day order on a thread and a reading
    connection of its own, waited for before this returns; it writes nothing here."""
    from gpuledger.core.errors import InputError
    from gpuledger.core.rules import SamplingRules

    if SamplingRules.of(settings).margin >= DAY:
        raise InputError("the roll-up's read margin is a day or more: load, then roll up")
    with wh.reader() as reader, ThreadPoolExecutor(2, thread_name_prefix="demo") as pool, \
            _Producer(prepared_days(simulated_days(sim, dra))) as days, \
            _DayTasks(wh, each_day) as tasks:  # all while the inventory loads
        objects = pool.submit(dra_inventory, dra) if dra is not None else None
        rows = load_inventory(wh, sim)
        samples = 0  # the progress note counts sample rows, as `load_simulation`'s does
        with Progress(label, total=len(list(sim.window.days()))) as progress:
            rolling = _Rolling(wh, reader, pool, settings, progress)
            for n, (window, batch) in enumerate(days, start=1):
                samples += wh.load(batch).total_rows
                if objects is not None:  # before the first roll-up, which reads the DRA cards
                    rows += wh.load(objects.result()).total_rows
                    objects = None
                rolling.store(samples)  # the previous day's, computed while this one loaded
                if n % HAND_BACK_DAYS == 0:
                    tasks.wait()  # nothing else reads the warehouse now
                    wh.release_cache()
                rolling.start(window)
                tasks.loaded(window)
            rolling.finish(samples)
    return rows + samples


class _DayTasks:
    """`each_day` of `load_and_rollup`: submitted as each day is stored, run one at a time on a
    thread of its own through a reading connection of its own (a DuckDB connection serves one
    thread; the roll-up's reader is busy on the pool), all finished on a clean exit (its first
    error raised there); on an error in the load, the ones not started are cancelled."""

    def __init__(self, wh: Warehouse, each_day: DayTask | None) -> None:
        self._wh, self._each_day = wh, each_day
        self._running: tuple[DayTask, Warehouse, ThreadPoolExecutor] | None = None
        """The task, its reader and its thread while entered with a task (all or none)."""
        self._done: list[Future[None]] = []

    def __enter__(self) -> _DayTasks:
        if self._each_day is not None:
            self._running = (self._each_day, self._wh.reader(),
                             ThreadPoolExecutor(1, thread_name_prefix="demo-days"))
        return self

    def loaded(self, day: Window) -> None:
        if self._running is not None:
            task, reader, thread = self._running
            self._done.append(thread.submit(task, reader, day))

    def wait(self) -> None:
        """Every task submitted so far finished (the first error raised here)."""
        for done in self._done:
            done.result()

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if self._running is None:
            return
        _task, reader, thread = self._running
        self._running = None
        thread.shutdown(wait=True, cancel_futures=exc_type is not None)
        reader.close()
        if exc_type is None:
            self.wait()


class _Rolling:
    """The roll-ups, computed on a pool thread through `reader` and stored by the writer in
    day order: once day d is loaded, day d-1's roll-up (its margin now stored) is computed
    while the writer loads day d+1; the writer stores it after that load."""

    def __init__(self, wh: Warehouse, reader: Warehouse, pool: ThreadPoolExecutor,
                 settings: Settings, progress: Progress) -> None:
        self._wh, self._reader, self._pool, self._settings = wh, reader, pool, settings
        self._progress = progress
        self._computing: Future[LoadBatch] | None = None
        self._last: Window | None = None

    def start(self, window: Window) -> None:
        """`window` is stored: start the previous day's roll-up (its margin now stored)."""
        from gpuledger.analytics.usage.rollup import rollup_batch

        if self._last is not None:
            self._computing = self._pool.submit(rollup_batch, self._reader, self._last, self._settings)
        self._last = window

    def finish(self, rows: int) -> None:
        """The roll-up in flight, then the last day's (nothing left to overlap it with)."""
        from gpuledger.analytics.usage.rollup import rollup_batch

        self.store(rows)
        if self._last is not None:
            self._wh.load(rollup_batch(self._wh, self._last, self._settings))
            self._progress.advance(note=f"{rows:,} rows")

    def store(self, rows: int) -> None:
        """A day is stored: store the roll-up computed while it loaded (none in flight after)."""
        if self._computing is not None:
            self._wh.load(self._computing.result())
            self._computing = None
            self._progress.advance(note=f"{rows:,} rows")
