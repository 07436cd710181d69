"""The demo's simulated samples are the ones main's tree produced before the demo was made
faster (decision 0137): the same fleet, seed and window give byte-identical frames.

The digests below were computed with the tree at bc7f130 (`git archive bc7f130`, the same
`_digests` code run with PYTHONPATH on that tree) for the demo fleet at 40 GPUs with its DRA
pool, over two days starting mid-day (so a day is clipped at each end): per day and table, the
row count and the sha256 of the frame written as CSV (every column, every row, in order; polars
writes floats as their shortest exact form). A change to the simulator that moves one sample,
one label or one digit of one value changes a digest; a faster simulator must keep them all.
Issue 29 changed the DRA pool's samples on purpose (its plan and labels as upstream writes them,
decision 0163): the three `gpu_samples` digests were computed again on that tree, after checking
that the rows of every other card hash as before (same row counts, same digests without the DRA
cards) and that `token_samples` and `queue_samples` are unchanged.
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
    ("2026-10-04T12", "gpu_samples"): (61810, "eceddb32b969015a9a6e07ee4d4d2ccb2660ffdb77b73a6b0784f8897d53fb56"),
    ("2026-10-04T12", "token_samples"): (14394, "e651f82b00bc1c6f27ce71378aaa930ade429b6d4a25ec2e029947257b78b976"),
    ("2026-10-04T12", "queue_samples"): (76320, "cdec9dea4ae9daeaea5a7373847be3295089f588abe4b782f40e6c8213bfa97b"),
    ("2026-10-05T00", "gpu_samples"): (122998, "4d44f1571bf6e82c7315432b694a79ddcc55169265fc8393cb864fbd0b3d313f"),
    ("2026-10-05T00", "token_samples"): (28779, "ee8a98f1032e23c4f6efe2e8fe459e5079b5c01ed81a0340827d70cd484b9229"),
    ("2026-10-05T00", "queue_samples"): (152640, "0041b100b7842fed4e3ad8b8a9d1f9c8ea28e88273e60400b8a2fbcfaf2e6144"),
    ("2026-10-06T00", "gpu_samples"): (62231, "32fc3dca21c4e3b3235c0066566a41ba7ef68a2ee178a4794ed2f7aa759e6291"),
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
