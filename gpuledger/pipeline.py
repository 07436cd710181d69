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
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.terminal_progress import Progress

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.simulator.dra_fleet import DraFleet
    from gpuledger.simulator.engine import Simulation
    from gpuledger.warehouse import Warehouse

    Days = Iterator[tuple[Window, dict[str, pl.DataFrame]]]

SIMULATOR_SOURCE = "simulator"
DAY = timedelta(days=1)
AHEAD = 2
"""Days the producer may simulate ahead of the writer (bounds memory: ~1 M rows a day at 256 GPUs)."""


def load_inventory(wh: Warehouse, sim: Simulation, dra: DraFleet | None = None) -> int:
    """The simulated inventory (and the DRA pool's objects, through the collector's parser,
    as a collector listing every 10 minutes would have stored them); returns rows."""
    from gpuledger.warehouse import LoadBatch

    rows = wh.load(LoadBatch(sim.inventory())).total_rows
    if dra is not None:
        from gpuledger.collectors.dra import DraObjects, frames_from_history

        objects = frames_from_history((at, DraObjects(**o)) for at, o in dra.snapshots())
        rows += wh.load(LoadBatch({**objects, "namespaces": dra.namespaces()})).total_rows
    return rows


def simulated_days(sim: Simulation, dra: DraFleet | None = None) -> Days:
    """Each day's sample frames, the DRA pool's GPU samples stacked under the fleet's."""
    import polars as pl

    for window, simulated in sim.batches(chunk=DAY):
        frames = dict(simulated)
        if dra is not None:
            samples = [frames["gpu_samples"], dra.gpu_samples(window)]
            frames["gpu_samples"] = pl.concat(samples, how="vertical_relaxed")
        yield window, frames


def load_simulation(wh: Warehouse, sim: Simulation, *, label: str = "simulate + load",
                    dra: DraFleet | None = None) -> int:
    """Load inventory, then each day's samples with the `simulator` watermark; returns rows.

    With `dra`, the DRA pool too: its objects and its samples in the same day batches."""
    from gpuledger.warehouse import LoadBatch

    rows = load_inventory(wh, sim, dra)
    with Progress(label, total=len(list(sim.window.days()))) as progress:
        for window, frames in simulated_days(sim, dra):
            rows += wh.load(LoadBatch(frames, window, {SIMULATOR_SOURCE: window.end})).total_rows
            progress.advance(note=f"{rows:,} rows")
    return rows


def rollup(wh: Warehouse, window: Window, settings: Settings, *, label: str = "roll-up") -> int:
    """Store `card_hours_hourly` and `allocations` for `window`, one UTC day at a time."""
    from gpuledger.analytics.rollup import rollup_batch

    rows = 0
    days = list(window.days())
    with Progress(label, total=len(days)) as progress:
        for day in days:
            rows += wh.load(rollup_batch(wh, day, settings)).total_rows
            progress.advance()
    return rows


class _Producer:
    """`simulated_days` on a thread, at most `AHEAD` days ahead; its error re-raised here."""

    _END = object()

    def __init__(self, days: Days) -> None:
        self._days = days
        self._queue: queue.Queue[object] = queue.Queue(maxsize=AHEAD)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="simulate", daemon=True)

    def __enter__(self) -> _Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # the writer failed or finished: stop simulating, free the slot
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                self._thread.join(timeout=0.1)

    def _run(self) -> None:
        try:
            for item in self._days:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the writer thread, which raises it
            self._error = exc
        self._put(self._END)

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Days:
        while (item := self._queue.get()) is not self._END:
            yield item  # type: ignore[misc]
        if self._error is not None:
            raise self._error


def load_and_rollup(wh: Warehouse, sim: Simulation, settings: Settings, *,
                    dra: DraFleet | None = None, label: str = "simulate + load + roll-up") -> int:
    """`load_simulation` then `rollup` over the simulation's window, overlapped (module
    docstring); returns the rows loaded. Each day's roll-up runs once the next day is loaded,
    when its read margin (`SampleRules.margin`, minutes) is in the warehouse."""
    from gpuledger.analytics.samples import SampleRules
    from gpuledger.core.errors import InputError

    if SampleRules.of(settings).margin >= DAY:
        raise InputError("the roll-up's read margin is a day or more: load, then roll up")
    with _Producer(simulated_days(sim, dra)) as days:  # simulating while the inventory loads
        rows = load_inventory(wh, sim, dra)
        with Progress(label, total=len(list(sim.window.days()))) as progress:
            rows += _load_rolling(wh, days, settings, progress)
    return rows


def _load_rolling(wh: Warehouse, days: _Producer, settings: Settings, progress: Progress) -> int:
    """Load each day as it comes; roll up the day before it (then the last one)."""
    from gpuledger.analytics.rollup import rollup_batch
    from gpuledger.warehouse import LoadBatch

    rows = 0
    pending: list[Window] = []
    for window, frames in days:
        rows += wh.load(LoadBatch(frames, window, {SIMULATOR_SOURCE: window.end})).total_rows
        for day in pending:
            wh.load(rollup_batch(wh, day, settings))
            progress.advance(note=f"{rows:,} rows")
        pending = [window]
    for day in pending:
        wh.load(rollup_batch(wh, day, settings))
        progress.advance(note=f"{rows:,} rows")
    return rows
