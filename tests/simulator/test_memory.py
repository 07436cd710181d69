"""A longer stream does not need more memory: samples are produced chunk by chunk.

Cases: the peak RSS of a child process streaming 4 days is within 15% (+40 MiB) of one
streaming 1 day of the same fleet; every chunk's gpu_samples frame is bounded by devices x
steps of that chunk, never the window's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest

CHILD = """
import json, resource, sys
from datetime import UTC, datetime, timedelta
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
days = int(sys.argv[1])
start = datetime(2026, 11, 2, tzinfo=UTC)
sim = Simulation(FleetSpec.default(gpus=64), Window(start, start + timedelta(days=days)), seed=7)
rows = 0
for _, frames in sim.batches(timedelta(hours=12)):
    rows += frames["gpu_samples"].height
print(json.dumps({"rows": rows, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _peak(days: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(days)], capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_peak_memory_does_not_grow_with_the_window():
    one, four = _peak(1), _peak(4)
    assert four["rows"] > 3.9 * one["rows"]
    assert four["peak_mib"] < one["peak_mib"] * 1.15 + 40, (one, four)


def test_chunk_frames_are_bounded(tiny_sim):
    devices = len(tiny_sim.hw.slots)
    for window, frames in tiny_sim.batches(timedelta(hours=3)):
        steps = int((window.end - window.start) / tiny_sim.window.step)
        assert frames["gpu_samples"].height <= devices * steps
        assert frames["gpu_samples"]["ts"].n_unique() == steps
