"""A small simulated fleet (10 cards on 5 nodes, one per pool: exclusive, MIG, time-slice,
vGPU, inference) over November and December 2024, loaded into DuckDB warehouses for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse

STEP = timedelta(minutes=5)
SIM_WINDOW = Window(datetime(2024, 11, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC), STEP)
"""November and December 2024: in the past whatever the machine's clock says, so the CLI (which
reads the clock) may finalize them."""
TEAMS = ({"name": "nlp", "weight": 3.0}, {"name": "vision", "weight": 2.0}, {"name": "speech", "weight": 1.0})
SEED = 11


def simulation():
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    spec = FleetSpec.default(gpus=10, gpus_per_node=2, teams=list(TEAMS))
    return Simulation(spec, SIM_WINDOW, seed=SEED)


def load(path: Path, until: datetime | None = None, since: datetime | None = None,
         inventory: bool = True) -> None:
    """Load the inventory and the sample chunks whose day lies in [since, until)."""
    sim = simulation()
    with Warehouse.open(path) as wh:
        if inventory:
            wh.load(LoadBatch(sim.inventory()))
        for window, frames in sim.batches(timedelta(days=1)):
            if (until is None or window.start < until) and (since is None or window.start >= since):
                wh.load(LoadBatch(frames, window=window))
