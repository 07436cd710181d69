"""Compositions of stages that more than one command runs (the roof wires, stages work).

- `load_simulation`: a simulated fleet's inventory and samples into the warehouse, a day per
  transaction (so a kill loses at most the day in flight, and re-running is safe);
- `rollup`: derive the hourly card-hour roll-up and allocation intervals for a window, a day
  per transaction, in order (the roll-up watermark only moves forward).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.terminal_progress import Progress

if TYPE_CHECKING:
    from gpuledger.simulator.dra_fleet import DraFleet
    from gpuledger.simulator.engine import Simulation
    from gpuledger.warehouse import Warehouse

SIMULATOR_SOURCE = "simulator"


def load_simulation(wh: Warehouse, sim: Simulation, *, label: str = "simulate + load",
                    dra: DraFleet | None = None) -> int:
    """Load inventory, then each day's samples with the `simulator` watermark; returns rows.

    With `dra`, the DRA pool too: its objects through the collector's parser (as a collector
    listing every 10 minutes would have stored them), its samples in the same day batches."""
    import polars as pl

    from gpuledger.warehouse import LoadBatch

    rows = wh.load(LoadBatch(sim.inventory())).total_rows
    if dra is not None:
        from gpuledger.collectors.dra import DraObjects, frames_from_history

        objects = frames_from_history((at, DraObjects(**o)) for at, o in dra.snapshots())
        rows += wh.load(LoadBatch({**objects, "namespaces": dra.namespaces()})).total_rows
    days = list(sim.window.days())
    with Progress(label, total=len(days)) as progress:
        for window, simulated in sim.batches(chunk=timedelta(days=1)):
            frames = dict(simulated)
            if dra is not None:
                samples = [frames["gpu_samples"], dra.gpu_samples(window)]
                frames["gpu_samples"] = pl.concat(samples, how="vertical_relaxed")
            stats = wh.load(LoadBatch(frames, window, {SIMULATOR_SOURCE: window.end}))
            rows += stats.total_rows
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
