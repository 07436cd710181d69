"""What the two differential tests of the sample pass share (`test_sample_pass_vs_sql`: the
pass's three consumers; `test_rollup_one_pass`: the roll-up's one pass): the simulated fleet
they run on and what "the same frame" means against the frozen SQL (`bench.sampling_sql_before`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import polars as pl
from polars.testing import assert_frame_equal

from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse

START = datetime(2026, 11, 2, tzinfo=UTC)
DAY = Window(START, START + timedelta(days=1))
FLOATS = {"active_ratio", "active_mean"}
"""The float averages: each engine sums in its own order, so they agree within 1e-12."""


@contextmanager
def simulated_fleet() -> Iterator[Warehouse]:
    """40 cards with scrape gaps and a MIG reconfiguration (every sharing mode), loaded for DAY
    with 3 h of data on each side (the pass's margins)."""
    spec = FleetSpec.default(gpus=40, scenario={"scrape_gaps": 0.02, "mig_reconfigure": True})
    sim = Simulation(spec, Window(START - timedelta(hours=3), DAY.end + timedelta(hours=3)), seed=3)
    inventory = sim.inventory()
    inventory.pop("mig_instances")
    with Warehouse.open(":memory:") as wh:
        wh.load(LoadBatch(inventory))
        for chunk, frames in sim.batches():
            wh.load(LoadBatch(frames, window=chunk))
        yield wh


def assert_same(new: pl.DataFrame, old: pl.DataFrame, keys: list[str]) -> None:
    """The same rows in the same schema, every column bit for bit but `FLOATS` (1e-12)."""
    new, old = new.sort(keys, nulls_last=True), old.sort(keys, nulls_last=True)
    assert new.schema == old.schema
    exact = [c for c in new.columns if c not in FLOATS]
    assert_frame_equal(new.select(exact), old.select(exact), check_exact=True)
    floats = [c for c in new.columns if c in FLOATS]
    if floats:
        assert_frame_equal(new.select(floats), old.select(floats), check_exact=False, rel_tol=1e-12, abs_tol=0)
