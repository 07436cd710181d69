"""The DRA pool beside the simulator's device-plugin fleet, loaded the way the demo loads a
simulated fleet (`gpuledger.pipeline.load_simulation(..., dra=DraFleet(window))`), for a day
cut mid-block (20 h: three whole blocks of the six-hour plan and one cut at 2 h).

Cases: the bill's DRA namespaces equal the fleet's truth (card-hours within 0.5%, idle within
1%; blocks' truths summed, the cut block counting only its minutes inside); the fleet's
card-hours are every card of both fleets for the whole window; the roll-up gives the same.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.pipeline import load_simulation, rollup
from gpuledger.simulator.dra import CARDS, TEAMS
from gpuledger.simulator.dra_fleet import DraFleet
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import Warehouse

START = datetime(2026, 10, 5, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(hours=20))
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("source", ["raw", "rollup"])
def test_the_demo_pool_bills_its_truth(tmp_path, source) -> None:
    sim = Simulation(FleetSpec.default(gpus=16), WINDOW, seed=3)
    fleet = DraFleet(WINDOW)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        load_simulation(wh, sim, dra=fleet)
        if source == "rollup":
            rollup(wh, WINDOW, Settings())
        bill = compute_bill(wh, WINDOW, Settings(), by=("team", "namespace"), source=source)
    assert bill.fleet_card_hours == pytest.approx((sim.gpu_count + len(CARDS)) * WINDOW.hours)
    lines = bill.lines.filter(pl.col("namespace").is_in(list(TEAMS)))
    got = {TEAMS[r["namespace"]]: r for r in lines.iter_rows(named=True)}
    for team, truth in fleet.truth().items():
        assert got[team]["card_hours"] == pytest.approx(truth["card_hours"], rel=0.005), team
        assert got[team]["idle_card_hours"] == pytest.approx(truth["idle_card_hours"], rel=0.01), team
