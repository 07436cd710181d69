"""Planning on the right plane, on a mixed fleet (the simulator's device-plugin fleet plus the
DRA pool) in a real DuckDB warehouse.

Cases:
- the MIG optimizer's fleet leaves out every DRA-plane node, even when the dcgm inventory calls
  its cards `mig` in a planned pool, and a real CP-SAT MIG plan for the mixed fleet names no DRA
  node (so the plane guard of test_k8s_dra is the second line, not the only one);
- fragmentation of a dynamic-MIG card: with 1g devices at placements 1 and 5, six slices are
  free (a 4g by count) but only a 2g can still be created; with the pool's own claims at minute
  150 the card is not fragmented;
- profile recommendations cover 90% of the window's MIG claim-hours with the fewest profiles,
  each offered as a DeviceClass selecting that profile.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.devices.dra_plan import dra_plane_nodes, fragmentation, profile_recommendations
from gpuledger.core.config import Settings
from gpuledger.core.frames_dra import DRA_CLAIMS, DRA_DEVICES
from gpuledger.core.table_spec import polars_schema
from gpuledger.core.window import Window
from gpuledger.optimizer.mig.observed import load_fleet_from_warehouse, observed_demand
from gpuledger.optimizer.mig.planner import MigOptions, plan_mig
from gpuledger.simulator.dra import CARDS, NODES, DraPool
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch
from tests.dra.test_bill_e2e import load_dra

START = datetime(2026, 3, 1, tzinfo=UTC)
POOL = DraPool(START)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    path = tmp_path_factory.mktemp("mixed") / "w.duckdb"
    sim = Simulation(FleetSpec.default(gpus=16), Window(START, POOL.end), seed=7)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=sim.inventory()))
        for chunk, frames in sim.batches(chunk=timedelta(hours=6)):
            wh.load(LoadBatch(frames=frames, window=chunk))
        load_dra(wh, POOL)
        # As the dcgm inventory would see the DRA cards with MIG series: `mig`, in a MIG pool.
        cards = wh.query("SELECT * FROM gpus WHERE sharing_mode = 'dra'").with_columns(
            pl.lit("mig").alias("sharing_mode"), pl.lit("a100-mig").alias("pool"))
        wh.load(LoadBatch(frames={"gpus": cards}))
    return path


def test_the_mig_optimizer_never_plans_a_dra_node(mixed: Path) -> None:
    with Warehouse.open(mixed, read_only=True) as wh:
        assert dra_plane_nodes(wh) == set(NODES)
        fleet = load_fleet_from_warehouse(wh, pools=["a100-mig"])
        demand = observed_demand(wh, fleet, timedelta(hours=6))
    assert fleet.nodes and not {n.name for n in fleet.nodes} & set(NODES)
    plan = plan_mig(fleet, demand, MigOptions(time_limit_s=10, baselines=False), Settings(), POOL.end)
    assert not set(NODES) & {str(n) for n in _named_nodes(plan.model_dump(mode="json"))}


def _named_nodes(body: object) -> set[str]:
    """Every value under a `node` key anywhere in the plan's JSON."""
    found: set[str] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "node" and isinstance(value, str):
                found.add(value)
            found |= _named_nodes(value)
    elif isinstance(body, list):
        for value in body:
            found |= _named_nodes(value)
    return found


def _fragmented_card(tmp_path: Path) -> Warehouse:
    card = CARDS[5]
    at = START + timedelta(hours=1)
    devices = pl.DataFrame([
        {"driver": "gpu.nvidia.com", "pool": card.node, "device": f"mig-1g-{s}", "node": card.node,
         "kind": "mig", "uuid": None, "parent_uuid": card.uuid, "profile": "1g.10gb", "placement": s,
         "model": "H100-80GB", "memory_mib": None, "dynamic": 1, "observed_at": at} for s in (1, 5)
    ], schema=polars_schema(DRA_DEVICES))
    claims = pl.DataFrame([
        {"claim_uid": f"u{s}", "request": "gpu", "driver": "gpu.nvidia.com", "pool": card.node,
         "device": f"mig-1g-{s}", "namespace": "ns", "claim": f"c{s}", "device_class": None,
         "template": None, "sharing": "exclusive", "start_ts": at, "end_ts": at + timedelta(hours=1)}
        for s in (1, 5)
    ], schema=polars_schema(DRA_CLAIMS))
    wh = Warehouse.open(tmp_path / "frag.duckdb")
    wh.load(LoadBatch(frames={"dra_devices": devices, "dra_claims": claims}))
    return wh


def test_fragmentation_of_a_dynamic_card(tmp_path: Path) -> None:
    with _fragmented_card(tmp_path) as wh:
        row = fragmentation(wh, START + timedelta(hours=1, minutes=30)).row(0, named=True)
    assert row["free_slices"] == 6
    assert row["largest_by_count"] == "4g.40gb" and row["largest_creatable"] == "2g.20gb"
    assert row["fragmented"] is True


def test_the_pool_at_minute_150_is_not_fragmented(mixed: Path) -> None:
    with Warehouse.open(mixed, read_only=True) as wh:
        frame = fragmentation(wh, POOL.at(150))
    row = frame.filter(pl.col("uuid") == CARDS[4].uuid).row(0, named=True)
    assert row["free_slices"] == 2 and row["largest_creatable"] == "2g.20gb" and not row["fragmented"]


def test_profile_recommendations_cover_the_claim_hours(mixed: Path) -> None:
    with Warehouse.open(mixed, read_only=True) as wh:
        recs = profile_recommendations(wh, Window(START, POOL.end), coverage=0.9)
    # MIG claim-hours of the plan: 3g 6 + 3 = 9, 2g 220/60, 4g 1, 1g 45/60 (total 14.42).
    assert [r["profile"] for r in recs] == ["3g.40gb", "2g.20gb", "4g.40gb"]
    assert recs[0]["claim_hours"] == pytest.approx(9.0)
    assert recs[0]["claims"] == 2
    selector = recs[1]["device_class"]["spec"]["selectors"][0]["cel"]["expression"]
    assert "profile == '2g.20gb'" in selector
