"""`gpuledger recommend --kind dra-fragmentation / dra-profiles` on the seeded DRA pool (the CLI,
end to end, on a real DuckDB file).

The warehouse: the simulator's pool (`simulator.dra`, collected as 10-minute snapshots) plus one
extra dynamic H100 card `GPU-frag` on `dra-node-9` holding two 1g.10gb claims at memory slices 1
and 5 during hour 1 of the 6-hour window.

Known answers, by hand from the plan (`CLAIMS`) and the H100 placement rules (memory slices 0-7;
4g.40gb starts at 0 only, 3g.40gb at 0 or 4, 2g.20gb at 0/2/4):
- the pool's dynamic cards are never fragmented: card 4 has free {0-3} (3g at 4: a 4g fits at
  0), {1-3} (1g at 0 too: a 2g fits at 2), {0,1} (2g at 2 and 3g at 4: a 2g fits at 0), and
  {0,1,4-7} after minute 180 (a 3g at 4: 4 slices, as many as the 4g by count); card 5 with its
  4g at 0 has {4-7}, where a 3g fits;
- GPU-frag in hour 1: free {0,2,3,4,6,7} = 6 slices, a 4g.40gb by count, only a 2g.20gb (start
  2) creatable: 2 slices withheld for 1 h of 6 (17%); at 3.00/card-hour the stranded capacity is
  2/8 x 3.00 x 1 h x 730/6 = 91.25 a month;
- MIG claim-hours: 3g 6 + 3 = 9 (2 claims), 2g 220/60, 1g 45/60 + 2 x 1 (GPU-frag) = 2.75, 4g 1:
  total 16.4167. The goal 0.8: 9 (55%) + 3.667 (77%) + 2.75 (94%) -> three profiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.core.frames_dra import DRA_CLAIMS, DRA_DEVICES
from gpuledger.core.table_spec import polars_schema
from gpuledger.simulator.dra import DraPool
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch
from tests.dra.test_bill_e2e import load_dra

START = datetime(2026, 3, 1, tzinfo=UTC)
POOL = DraPool(START)
HOUR_1 = START + timedelta(hours=1)


def _extra_card() -> dict[str, pl.DataFrame]:
    devices = pl.DataFrame([
        {"driver": "gpu.nvidia.com", "pool": "dra-node-9", "device": f"mig-1g-{s}", "node": "dra-node-9",
         "kind": "mig", "uuid": None, "parent_uuid": "GPU-frag", "profile": "1g.10gb", "placement": s,
         "model": "H100-80GB", "memory_mib": None, "dynamic": 1, "observed_at": HOUR_1} for s in (1, 5)
    ], schema=polars_schema(DRA_DEVICES))
    claims = pl.DataFrame([
        {"claim_uid": f"frag-{s}", "request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-node-9",
         "device": f"mig-1g-{s}", "namespace": "dra-team-a", "claim": f"frag-{s}", "device_class": None,
         "template": None, "sharing": "exclusive", "start_ts": HOUR_1, "end_ts": HOUR_1 + timedelta(hours=1)}
        for s in (1, 5)
    ], schema=polars_schema(DRA_CLAIMS))
    return {"dra_devices": devices, "dra_claims": claims}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dra-advice") / "w.duckdb"
    with Warehouse.open(path) as wh:
        load_dra(wh, POOL)
        wh.load(LoadBatch(frames=_extra_card()))
    return path


def _recommend(warehouse: Path, tmp: Path, *kinds: str) -> dict:
    cfg = tmp / "cfg.yaml"
    cfg.write_text("price_book:\n  - {model: H100-80GB, unit_price: 3.00}\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    args = [a for k in kinds for a in ("--kind", k)]
    out = subprocess.run(
        [sys.executable, "-m", "gpuledger", "recommend", "--warehouse", str(warehouse), "--config", str(cfg),
         "--start", START.isoformat(), "--end", POOL.end.isoformat(), *args, "--all", "-o", "json"],
        capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_only_the_fragmented_card_is_reported(warehouse: Path, tmp_path: Path) -> None:
    doc = _recommend(warehouse, tmp_path, "dra-fragmentation")
    (row,) = doc["recommendations"]
    assert row["kind"] == "dra_fragmentation" and row["scope"] == "dra-node-9 GPU-frag"
    assert row["current"] == "fragmented 17% of the window"
    assert row["recommended"] == "free a 4g.40gb (only a 2g.20gb fits)"
    assert row["monthly_saving"] == pytest.approx(2 / 8 * 3.00 * 1 * 730 / 6)
    (card,) = doc["dra-fragmentation"]["cards"]
    assert card["hours"] == pytest.approx(1.0) and card["slice_hours"] == pytest.approx(2.0)
    assert card["worst"]["free_slices"] == 6 and card["worst"]["at"] == HOUR_1.isoformat()


def test_profiles_cover_the_goal_with_device_classes(warehouse: Path, tmp_path: Path) -> None:
    doc = _recommend(warehouse, tmp_path, "dra-profiles")
    # ranked by money (issue 32); these carry no saving, so compare them by profile
    rows = {r["scope"]: r for r in doc["recommendations"]}
    assert sorted(rows) == sorted(["3g.40gb", "2g.20gb", "1g.10gb"]) and len(doc["recommendations"]) == 3
    profiles = doc["dra-profiles"]["profiles"]
    total = 9 + 220 / 60 + 2.75 + 1
    assert [p["claim_hours"] for p in profiles] == pytest.approx([9, 220 / 60, 2.75])
    assert [p["claims"] for p in profiles] == [2, 1, 3]
    assert profiles[0]["share"] == pytest.approx(9 / total)
    assert rows["1g.10gb"]["recommended"] == "DeviceClass mig-1g-10gb.gpu.nvidia.com"
    assert all(r["monthly_saving"] is None for r in rows.values())  # not priced, never 0 (0213)
    cel = profiles[2]["device_class"]["spec"]["selectors"][0]["cel"]["expression"]
    assert cel == "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"


def test_both_kinds_together_sum_the_savings(warehouse: Path, tmp_path: Path) -> None:
    doc = _recommend(warehouse, tmp_path, "dra-fragmentation", "dra-profiles")
    assert len(doc["recommendations"]) == 4
    assert doc["monthly_saving"] == pytest.approx(round(2 / 8 * 3.00 * 730 / 6, 2))


def test_fragmented_states_equal_the_per_moment_queries(warehouse: Path) -> None:
    """`dra_kinds` reads the cards and claims once and works each moment out in Python; at every
    moment of the window it must give what `dra_plan.fragmentation` queries for that moment."""
    from gpuledger.analytics.advice.dra_kinds import _fragmented_at, _moments
    from gpuledger.analytics.devices.dra_plan import fragmentation
    from gpuledger.core.window import Window

    with Warehouse.open(warehouse, read_only=True) as wh:
        moments = _moments(wh, Window(START, POOL.end))
        states = _fragmented_at(wh)
        seen = 0
        for at in moments:
            expected = fragmentation(wh, at).filter(pl.col("fragmented")).drop("fragmented")
            got = sorted(states(at), key=lambda r: r["uuid"])
            assert got == sorted(expected.to_dicts(), key=lambda r: r["uuid"])
            seen += len(got)
    assert len(moments) >= 8 and seen > 0
