"""The roll-up's one pass (`analytics.usage.rollup.held_and_runs`, Polars since decision 0122) returns
what the roll-up's SQL statement returned before it (`bench.sampling_sql_before.one_pass_sql`,
decision 0072), on the differential tests' simulated fleet (`tests.analytics.pass_fleet`: scrape
gaps, a MIG reconfiguration and every sharing mode, data on both sides of the day): the same
rows, every column bit for bit but the averaged `active_ratio` (within 1e-12: each engine sums
floats in its own order). Both under the hole rule the SQL was written for (`card-next-scrape-v1`;
the pass still computes under it, decision 0168), and without HAMi's holders (step 1b, decision
0160), which the statement predates: HAMi's cards are what it saw, one unheld series each."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from bench.sampling_params import params
from bench.sampling_sql_before import one_pass_sql
from gpuledger.analytics.sampling import holders
from gpuledger.analytics.usage import rollup
from gpuledger.core.config import Settings
from gpuledger.core.frames import polars_schema
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.core.rules import HOLE_RULE_V1, SamplingRules
from tests.analytics.pass_fleet import DAY, assert_same, simulated_fleet


def test_one_pass_equals_the_two_statements(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(holders, "vgpu_allocations_between",
                        lambda *_: pl.DataFrame(schema=polars_schema(VGPU_ALLOCATIONS)))
    with simulated_fleet() as wh:
        rules = replace(SamplingRules.of(Settings()), hole_rule=HOLE_RULE_V1)
        held, runs = rollup.held_and_runs(wh, DAY, rules)
        both = wh.query(one_pass_sql(), params(DAY, rules))
    ts = [pl.col(c).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for c in ("hour", "start_us", "end_us")]
    old_held = both.filter(pl.col("part") == "hourly").select(["hour", *held.columns[1:]])
    old_held = old_held.with_columns(ts[0]).rename({"hour": "ts"})
    old_runs = both.filter(pl.col("part") == "alloc").select(
        [c.replace("start_ts", "start_us").replace("end_ts", "end_us") for c in runs.columns]
    ).with_columns(ts[1:]).rename({"start_us": "start_ts", "end_us": "end_ts"})
    assert held.height > 1000 and runs.height > 100
    assert_same(held, old_held, ["ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"])
    assert_same(runs, old_runs, ["start_ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"])
