"""Three simulated clusters for the lake tests: different fleets, sizes, seeds, price books and
redistribution policies, and one team name (`nlp`) that appears in all three."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpuledger.core.config import Settings
from gpuledger.core.window import Window

PERIOD = "2024-11"
DATA = Window(datetime(2024, 11, 1, tzinfo=UTC), datetime(2024, 11, 3, tzinfo=UTC), timedelta(minutes=5))
"""Two days of samples in November 2024 (a past month, so it may be finalized)."""
AFTER = datetime(2025, 1, 15, tzinfo=UTC)
"""A publish time after the period is over."""
SHARED_TEAM = "nlp"


@dataclass(frozen=True)
class ClusterCase:
    name: str
    gpus: int
    gpus_per_node: int
    seed: int
    teams: tuple[str, ...]
    settings: Settings


CLUSTERS: tuple[ClusterCase, ...] = (
    ClusterCase("east", 10, 2, 3, (SHARED_TEAM, "vision"), Settings()),
    ClusterCase("west", 8, 4, 5, (SHARED_TEAM, "speech", "ads"), Settings.model_validate(
        {"idle": {"unallocated_redistribution": "proportional"},
         "price_book": [{"model": "H100-80GB", "unit_price": 2.75}, {"model": "H200-141GB", "unit_price": 4.10},
                        {"model": "A100-80GB", "unit_price": 1.70}, {"model": "A100-SXM4-40GB", "unit_price": 1.20}]}
    )),
    ClusterCase("lab", 6, 2, 9, (SHARED_TEAM, "biology"), Settings.model_validate(
        {"idle": {"unallocated_redistribution": "even"}}
    )),
)


def build_warehouse(case: ClusterCase, path: Path) -> Path:
    from gpuledger.analytics.usage.rollup import rollup_batch
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import LoadBatch, Warehouse

    teams = [{"name": t, "weight": 3.0 - i} for i, t in enumerate(case.teams)]
    spec = FleetSpec.default(gpus=case.gpus, gpus_per_node=case.gpus_per_node, teams=teams)
    sim = Simulation(spec, DATA, seed=case.seed)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for sub, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=sub))
            wh.load(rollup_batch(wh, sub, case.settings))  # as the collector closes each day
    return path
