"""The roll-up's one-pass statement (`analytics.rollup.held_and_runs`) returns exactly what the
two statements of the sampling model return when run on their own (`samples.held_hourly`,
`samples.allocation_runs`), on a fleet with scrape gaps, a MIG reconfiguration and every
sharing mode, over a day with data on both sides of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from polars.testing import assert_frame_equal

from gpuledger.analytics import rollup, samples
from gpuledger.analytics.samples import SampleRules
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse

START = datetime(2026, 11, 2, tzinfo=UTC)
DAY = Window(START, START + timedelta(days=1))


def test_one_pass_equals_the_two_statements():
    spec = FleetSpec.default(gpus=40, scenario={"scrape_gaps": 0.02, "mig_reconfigure": True})
    sim = Simulation(spec, Window(START - timedelta(hours=3), DAY.end + timedelta(hours=3)), seed=3)
    inventory = sim.inventory()
    inventory.pop("mig_instances")
    with Warehouse.open(":memory:") as wh:
        wh.load(LoadBatch(inventory))
        for chunk, frames in sim.batches():
            wh.load(LoadBatch(frames, window=chunk))
        rules = SampleRules.of(Settings())
        held, runs = rollup.held_and_runs(wh, DAY, rules)
        key = ["ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"]
        expected = samples.held_hourly(wh, DAY, rules)
        assert held.height > 1000 and runs.height > 100
        assert_frame_equal(held.sort(key, nulls_last=True), expected.sort(key, nulls_last=True))
        assert_frame_equal(runs, samples.allocation_runs(wh, DAY, rules))
