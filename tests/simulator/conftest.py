"""Small simulated fleets shared by the simulator tests (built once per session).

`tiny`: 14 cards on 7 two-card nodes, one node per pool plus a second training node and a
second MIG node (whose `all-3g.40gb` layout strands a compute slice), so every sharing mode
(exclusive, MIG, time-slice, vGPU), model and workload class appears; two days, 1-minute steps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec

START = datetime(2026, 11, 2, tzinfo=UTC)


@pytest.fixture(scope="session")
def tiny_spec() -> FleetSpec:
    data = FleetSpec.default(gpus=10, gpus_per_node=2).model_dump()
    data["pools"][0]["nodes"] = 2
    data["pools"][1]["nodes"] = 2
    return FleetSpec.parse(data)


@pytest.fixture(scope="session")
def tiny_window() -> Window:
    return Window(START, START + timedelta(days=2))


@pytest.fixture(scope="session")
def tiny_sim(tiny_spec: FleetSpec, tiny_window: Window) -> Simulation:
    return Simulation(tiny_spec, tiny_window, seed=7)


@pytest.fixture(scope="session")
def tiny_batches(tiny_sim: Simulation) -> list[tuple[Window, dict[str, pl.DataFrame]]]:
    return list(tiny_sim.batches(timedelta(days=1)))


@pytest.fixture(scope="session")
def tiny_samples(tiny_batches) -> dict[str, pl.DataFrame]:
    tables = tiny_batches[0][1].keys()
    return {t: pl.concat([frames[t] for _, frames in tiny_batches]) for t in tables}


@pytest.fixture(scope="session")
def tiny_truth(tiny_sim: Simulation) -> pl.DataFrame:
    return tiny_sim.ground_truth()


@pytest.fixture(scope="session")
def tiny_inventory(tiny_sim: Simulation) -> dict[str, pl.DataFrame]:
    return tiny_sim.inventory()
