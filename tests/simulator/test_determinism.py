"""Same seed and spec, same fleet: the simulator is a pure function of its inputs.

Cases: two simulations with one seed give identical inventory, sample frames and ground
truth; another seed gives other workloads on the same hardware; chunking (6 h vs 1 day) does
not change a single row; every chunk's rows lie inside its window; frames carry exactly the
column names and types of core/frames.py.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
from polars.testing import assert_frame_equal

from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.simulator.engine import Simulation


def test_same_seed_same_everything(tiny_spec, tiny_window, tiny_inventory, tiny_batches, tiny_truth):
    again = Simulation(tiny_spec, tiny_window, seed=7)
    for table, frame in again.inventory().items():
        assert_frame_equal(frame, tiny_inventory[table])
    for (w1, f1), (w2, f2) in zip(again.batches(timedelta(days=1)), tiny_batches, strict=True):
        assert w1 == w2
        for table in f1:
            assert_frame_equal(f1[table], f2[table])
    assert_frame_equal(again.ground_truth(), tiny_truth)


def test_other_seed_other_workloads_same_hardware(tiny_spec, tiny_window, tiny_inventory, tiny_samples):
    other = Simulation(tiny_spec, tiny_window, seed=8)
    assert_frame_equal(other.inventory()["gpus"], tiny_inventory["gpus"])
    assert set(other.inventory()["pods"]["pod"]) != set(tiny_inventory["pods"]["pod"])
    frames = list(other.batches(timedelta(days=1)))
    gpu = pl.concat([f["gpu_samples"] for _, f in frames])
    assert gpu["gr_engine_active"].sum() != tiny_samples["gpu_samples"]["gr_engine_active"].sum()


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(frame.columns, nulls_last=True)


def test_chunking_does_not_change_rows(tiny_sim, tiny_samples, tiny_truth):
    fine = list(tiny_sim.batches(timedelta(hours=6)))
    assert len(fine) == 8
    for table, frame in tiny_samples.items():
        assert_frame_equal(_sorted(pl.concat([f[table] for _, f in fine])), _sorted(frame))
    assert_frame_equal(tiny_sim.ground_truth(timedelta(hours=6)), tiny_truth)


def test_rows_inside_their_chunk(tiny_batches):
    for window, frames in tiny_batches:
        for frame in frames.values():
            assert frame.height
            assert frame["ts"].min() >= window.start
            assert frame["ts"].max() < window.end


def test_frames_match_the_contract(tiny_inventory, tiny_batches):
    for table, frame in [*tiny_inventory.items(), *tiny_batches[0][1].items()]:
        assert dict(frame.schema) == polars_schema(TABLES[table]), table
        for col in TABLES[table].columns:
            if not col.nullable:
                assert frame[col.name].null_count() == 0, f"{table}.{col.name}"
