"""The demo's simulated samples are the ones main's tree produced before the demo was made
faster (decision 0137): the same fleet, seed and window give byte-identical frames.

The digests below were computed with the tree at bc7f130 (`git archive bc7f130`, the same
`_digests` code run with PYTHONPATH on that tree) for the demo fleet at 40 GPUs with its DRA
pool, over two days starting mid-day (so a day is clipped at each end): per day and table, the
row count and the sha256 of the frame written as CSV (every column, every row, in order; polars
writes floats as their shortest exact form). A change to the simulator that moves one sample,
one label or one digit of one value changes a digest; a faster simulator must keep them all.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from gpuledger.commands._demo_pipeline import demo_fleet
from gpuledger.core.window import Window
from gpuledger.pipeline import simulated_days
from gpuledger.simulator.dra_fleet import DraFleet
from gpuledger.simulator.engine import Simulation

pytestmark = pytest.mark.slow
START = datetime(2026, 10, 4, 12, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(days=2))
FROZEN = {  # (day start, table): (rows, sha256 of the CSV), from the tree at bc7f130
    ("2026-10-04T12", "gpu_samples"): (61810, "c6e319878d24628771af15f57e7fd7c6efd0392f9feb106890ca22d2a97dd4bc"),
    ("2026-10-04T12", "token_samples"): (14394, "e651f82b00bc1c6f27ce71378aaa930ade429b6d4a25ec2e029947257b78b976"),
    ("2026-10-04T12", "queue_samples"): (76320, "cdec9dea4ae9daeaea5a7373847be3295089f588abe4b782f40e6c8213bfa97b"),
    ("2026-10-05T00", "gpu_samples"): (122998, "30fd542e47905335838db3230d01f088e933b5c60d936d5879637db2fc2273c5"),
    ("2026-10-05T00", "token_samples"): (28779, "ee8a98f1032e23c4f6efe2e8fe459e5079b5c01ed81a0340827d70cd484b9229"),
    ("2026-10-05T00", "queue_samples"): (152640, "0041b100b7842fed4e3ad8b8a9d1f9c8ea28e88273e60400b8a2fbcfaf2e6144"),
    ("2026-10-06T00", "gpu_samples"): (62231, "f35f4fbad5b45f5d6b6966c99f9a6e2e9d946c64f9c2f0e58cf051d6292b83d3"),
    ("2026-10-06T00", "token_samples"): (14394, "c42a572225e9cafb1bf0d744506e684d2c8f6e40c0bb672e636c61df327e4d5b"),
    ("2026-10-06T00", "queue_samples"): (76320, "b3014be118b59ca8b4739b882a98abcbcc4831ab2b27564ebee94652d7f203d3"),
}


def _digests() -> dict[tuple[str, str], tuple[int, str]]:
    sim = Simulation(demo_fleet(40), WINDOW, seed=7)
    out = {}
    for window, frames in simulated_days(sim, DraFleet(WINDOW)):
        for name, frame in frames.items():
            digest = hashlib.sha256(frame.write_csv().encode()).hexdigest()
            out[(f"{window.start:%Y-%m-%dT%H}", name)] = (frame.height, digest)
    return out


def test_demo_samples_equal_main_before_the_speed_work() -> None:
    assert _digests() == FROZEN
