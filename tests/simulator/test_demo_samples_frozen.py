"""The demo's simulated samples are the ones main's tree produced before the demo was made
faster (decision 0137): the same fleet, seed and window give byte-identical frames.

The digests below were computed with the tree at bc7f130 (`git archive bc7f130`, the same
`_digests` code run with PYTHONPATH on that tree) for the demo fleet at 40 GPUs with its DRA
pool, over two days starting mid-day (so a day is clipped at each end): per day and table, the
row count and the sha256 of the frame written as CSV (every column, every row, in order; polars
writes floats as their shortest exact form). A change to the simulator that moves one sample,
one label or one digit of one value changes a digest; a faster simulator must keep them all.

The three `gpu_samples` digests were frozen again for issue 29 (HAMi's shapes: a HAMi card is
one dcgm series without pod labels, not one series per held replica). Every other row was
checked unchanged first: main's tree and the issue-29 tree give identical digests for
`gpu_samples` without the 8 HAMi cards' rows, and for every token and queue frame.

Issue 29 changed the DRA pool's samples on purpose (its plan and labels as upstream writes them,
decision 0163): the three `gpu_samples` digests were computed again on that tree, after checking
that the rows of every other card hash as before (same row counts, same digests without the DRA
cards) and that `token_samples` and `queue_samples` are unchanged.

With both, the digests were computed once more on the merged tree, after checking per node that
it equals the HAMi tree everywhere but the DRA node and the DRA tree everywhere but the HAMi node.
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
    ("2026-10-04T12", "gpu_samples"): (54338, "047c1f824626e441767f645d62216b9bb2af6353931aad1f56d39cef3da865b4"),
    ("2026-10-04T12", "token_samples"): (14394, "e651f82b00bc1c6f27ce71378aaa930ade429b6d4a25ec2e029947257b78b976"),
    ("2026-10-04T12", "queue_samples"): (76320, "cdec9dea4ae9daeaea5a7373847be3295089f588abe4b782f40e6c8213bfa97b"),
    ("2026-10-05T00", "gpu_samples"): (107843, "204ffa6849a8dcad4541c13a24963df46f2619fe248eedf85fcef25bf67584fa"),
    ("2026-10-05T00", "token_samples"): (28779, "ee8a98f1032e23c4f6efe2e8fe459e5079b5c01ed81a0340827d70cd484b9229"),
    ("2026-10-05T00", "queue_samples"): (152640, "0041b100b7842fed4e3ad8b8a9d1f9c8ea28e88273e60400b8a2fbcfaf2e6144"),
    ("2026-10-06T00", "gpu_samples"): (55047, "d3ab4c9b112187dc921e62557a04266bcd97e8aa5e709d269b9f74fb0a0278cf"),
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
