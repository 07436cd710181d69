"""The whole path: simulator → OpenMetrics → real Prometheus (promtool backfill) → collect → bill.

A 40-card default fleet over 8 hours. The Kubernetes facts (gpus with sharing mode and
replicas, pods with their vGPU requests, namespaces, MIG instances) come through the collect
pipeline's Kubernetes snapshot hook, as the Kubernetes collector would give them; the samples
come only from Prometheus.

Cases:
- the bill of the collected warehouse is conserved to the cent, the fleet holds exactly
  cards x hours, and the fleet's allocated card-hours are within 1 % of the truth;
- per-team card-hours within 0.5 % and idle card-hours within 2 % of the simulator's ground
  truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.collect_pipeline import collect_window
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import Warehouse
from tests.analytics.conftest import assert_conserved
from tools.metrics_servers import ServerPool

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

WINDOW = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 1, 8, tzinfo=UTC))
GPUS = 40


class _Snapshot:
    """What the Kubernetes collector would load: the simulator's inventory frames."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def snapshot(self) -> Mapping[str, pl.DataFrame]:
        inventory = self.sim.inventory()
        return {k: inventory[k] for k in ("gpus", "nodes", "namespaces", "pods", "mig_instances")}


@pytest.fixture(scope="module")
def collected(
    tmp_path_factory: pytest.TempPathFactory, metrics_servers: ServerPool
) -> tuple[Bill, pl.DataFrame]:
    root = tmp_path_factory.mktemp("e2e")
    sim = Simulation(FleetSpec.default(gpus=GPUS), WINDOW, seed=7)
    sim.write_openmetrics(root / "fleet.om")
    server = metrics_servers.prometheus(root / "fleet.om")
    with Warehouse.open(root / "w.duckdb") as wh:
        collect_window(
            wh, Settings(), server.url, WINDOW, now=lambda: WINDOW.end + timedelta(minutes=5),
            kubernetes=_Snapshot(sim),
        )
        bill = compute_bill(wh, WINDOW, Settings())
    return bill, sim.ground_truth()


def _truth(truth: pl.DataFrame) -> dict[str, tuple[float, float]]:
    held = truth.filter(pl.col("allocation_state") == "allocated").with_columns(
        pl.col("team").fill_null("unattributed")
    )
    rows = held.group_by("team").agg(pl.col("card_hours").sum(), pl.col("idle_card_hours").sum())
    return {r[0]: (r[1], r[2]) for r in rows.iter_rows()}


def test_collected_bill_is_conserved_and_close_overall(collected: tuple[Bill, pl.DataFrame]) -> None:
    bill, truth = collected
    assert_conserved(bill, fleet_card_hours=GPUS * WINDOW.hours)
    held_truth = sum(c for c, _ in _truth(truth).values())
    teams = bill.lines.filter(~pl.col("team").is_in(["unallocated", "sharing_discount"]))
    held = float(teams["card_hours"].sum())
    assert held == pytest.approx(held_truth, rel=0.01)


def test_collected_bill_matches_truth_per_team(collected: tuple[Bill, pl.DataFrame]) -> None:
    bill, truth = collected
    lines = {r["team"]: r for r in bill.lines.iter_rows(named=True)}
    for team, (card_hours, idle) in _truth(truth).items():
        assert lines[team]["card_hours"] == pytest.approx(card_hours, rel=0.005), team
        assert lines[team]["idle_card_hours"] == pytest.approx(idle, rel=0.02, abs=1e-9), team

