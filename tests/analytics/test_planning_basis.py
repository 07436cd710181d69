"""The basis a planner prices a MIG profile by: one rule (`analytics.devices.shares.planning_basis`)
for right-sizing, right-sized demand and the profile catalog.

Cases (the fleet of `test_usage_features`: a small inference service holds a whole H100 at
3.00/h for 4 h using 6 GiB at p95 activity 0.1, so it fits a 1g.10gb, 1 compute slice of 7 and
1 memory slice of 8; an idle notebook needs a 1g.10gb too):
- `compute` and `memory` price the profile by the bill's own basis; `max_normalized` prices it by
  compute slices (the layout it would be normalized by is not known yet);
- right-sizing's saving per month is (3.00 - 3.00 x the planned share x the MIG discount 0.9)
  x 4 h x 730/4 under each basis; right-sized demand's card-hours are 2 workloads x 4 h x the
  planned share; the profile catalog prices a profile by the same share, a whole card by 1.
"""

from __future__ import annotations

import pytest

from gpuledger.analytics.devices.shares import billed_share, planning_basis
from gpuledger.analytics.workloads.recommend import recommend, rightsized_demand
from gpuledger.core.config import Settings, SharingSettings
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import load, window
from tests.analytics.test_usage_features import _fleet

PLANNED_1G = {"compute": 1 / 7, "memory": 1 / 8, "max_normalized": 1 / 7}
"""The share of an H100's 1g.10gb a planner prices, by the bill's basis (hand-computed)."""


def test_planning_basis_keeps_the_bill_basis_except_max_normalized() -> None:
    assert planning_basis("compute") == "compute"
    assert planning_basis("memory") == "memory"
    assert planning_basis("max_normalized") == "compute"


@pytest.mark.parametrize("basis", sorted(PLANNED_1G))
def test_planners_price_a_profile_by_the_planning_basis(tmp_path, basis: str) -> None:
    settings = Settings(sharing=SharingSettings(mig_share_basis=basis))  # type: ignore[arg-type]
    path = load(tmp_path / "f.duckdb", window(4), _fleet())
    with Warehouse.open(path, read_only=True) as wh:
        recs = recommend(wh, window(4), settings).recommendations
        demand = rightsized_demand(wh, window(4), settings)
    share = PLANNED_1G[basis]
    small = recs.filter(recs["pod"] == "svc-small").row(0, named=True)
    assert (small["kind"], small["recommended"]) == ("whole_to_mig", "1g.10gb")
    assert small["monthly_saving"] == pytest.approx((3.0 - 3.0 * share * 0.9) * 4 * 730 / 4)
    rows = {(r["model"], r["profile"]): r for r in demand.iter_rows(named=True)}
    assert rows[("H100-80GB", "1g.10gb")]["card_hours"] == pytest.approx(2 * 4 * share)
    assert billed_share("H100-80GB", "1g.10gb", basis) == pytest.approx(share)
    assert billed_share("H100-80GB", "whole", basis) == 1.0
