"""The roll-up's one pass (`analytics.rollup.held_and_runs`, Polars since decision 0122) returns
what the roll-up's SQL statement returned before it (`bench.sampling_sql_before.one_pass_sql`,
decision 0072), on a fleet with scrape gaps, a MIG reconfiguration and every sharing mode, over
a day with data on both sides of it: the same rows, every column bit for bit but the averaged
`active_ratio` (within 1e-12: each engine sums floats in its own order)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from polars.testing import assert_frame_equal

from bench.sampling_sql_before import one_pass_sql
from gpuledger.analytics import rollup
from gpuledger.analytics.samples import SampleRules, params
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
        both = wh.query(one_pass_sql(), params(DAY, rules))
    ts = [pl.col(c).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for c in ("hour", "start_us", "end_us")]
    old_held = both.filter(pl.col("part") == "hourly").select(["hour", *held.columns[1:]])
    old_held = old_held.with_columns(ts[0]).rename({"hour": "ts"})
    old_runs = both.filter(pl.col("part") == "alloc").select(
        [c.replace("start_ts", "start_us").replace("end_ts", "end_us") for c in runs.columns]
    ).with_columns(ts[1:]).rename({"start_us": "start_ts", "end_us": "end_ts"})
    key = ["ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"]
    assert held.height > 1000 and runs.height > 100
    held, old_held = held.sort(key, nulls_last=True), old_held.sort(key, nulls_last=True)
    assert_frame_equal(held.drop("active_ratio"), old_held.drop("active_ratio"), check_exact=True)
    assert_frame_equal(held.select("active_ratio"), old_held.select("active_ratio"), check_exact=False,
                       rel_tol=1e-12, abs_tol=0)
    alloc_key = ["start_ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"]
    assert_frame_equal(runs.sort(alloc_key, nulls_last=True), old_runs.sort(alloc_key, nulls_last=True),
                       check_exact=True)
