"""The org bill on DuckDB, against each cluster's own bill computed from its own warehouse.

- by cluster x team: every line of every cluster equals that cluster's own `gpuledger bill`
  line, every money column to the cent (and card-hours), special lines included;
- by team: each team's line is the sum, in cents, of its lines in the clusters it appears in
  (the shared `nlp` team rolls up by name); the org fleet cost is the clusters' sum;
- finer dimensions (model, pool x day) hold the same equalities;
- each cluster keeps its own redistribution policy (none, proportional, even);
- team aliases roll a renamed team up under one name without changing any cluster's numbers;
- a detail file that no longer matches its manifest checksum is refused; bad --by is one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.analytics.billing.lines import LINE_VALUES
from gpuledger.analytics.billing.money import to_cents
from gpuledger.analytics.billing.org_bill import compute_org_bill
from gpuledger.core.config_lake import LakeSettings
from gpuledger.core.errors import InputError
from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake
from tests.lake.conftest import copy_lake
from tests.lake.fleets import CLUSTERS, PERIOD, SHARED_TEAM

MONEY = ("list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost", "cost", "idle_cost")


def _key(row: dict, dims: tuple[str, ...]) -> tuple:
    return tuple(row[d] for d in dims)


@pytest.mark.parametrize("by", [("team",), ("team", "model"), ("team", "pool", "day")])
def test_each_cluster_line_is_its_own_bill(published_lake: Lake, reference_bills, by) -> None:
    org = compute_org_bill(published_lake, PERIOD, ("cluster", *by))
    assert org.by == ("cluster", *by)
    for case in CLUSTERS:
        own = reference_bills[(case.name, by)]
        mine = org.lines.filter(org.lines["cluster"] == case.name)
        assert mine.height == own.lines.height
        expected = {_key(r, by): r for r in own.lines.iter_rows(named=True)}
        for row in mine.iter_rows(named=True):
            ref = expected[_key(row, by)]
            for col in MONEY:
                assert to_cents(row[col]) == to_cents(ref[col]), (case.name, row["team"], col)
            assert row["card_hours"] == pytest.approx(ref["card_hours"], abs=1e-9)
        assert org.clusters[case.name] == own.fleet_cost


def test_org_team_lines_are_sums_of_cluster_lines(published_lake: Lake, reference_bills) -> None:
    org = compute_org_bill(published_lake, PERIOD, ("team",))
    expected: dict[str, dict[str, int]] = {}
    for case in CLUSTERS:
        for row in reference_bills[(case.name, ("team",))].lines.iter_rows(named=True):
            sums = expected.setdefault(row["team"], dict.fromkeys(MONEY, 0))
            for col in MONEY:
                sums[col] += to_cents(row[col])
    got = {row["team"]: row for row in org.lines.iter_rows(named=True)}
    assert set(got) == set(expected)
    for team, sums in expected.items():
        for col in MONEY:
            assert to_cents(got[team][col]) == sums[col], (team, col)
    shared = [c.name for c in CLUSTERS if SHARED_TEAM in {r["team"] for r in reference_bills[(c.name, ("team",))].lines.iter_rows(named=True)}]
    assert len(shared) == 3  # the shared team really is billed in every cluster
    fleet = sum(to_cents(reference_bills[(c.name, ("team",))].fleet_cost) for c in CLUSTERS)
    assert to_cents(org.fleet_cost) == fleet
    assert sum(to_cents(c) for c in org.lines["cost"].to_list()) == fleet


def test_clusters_keep_their_own_redistribution(published_lake: Lake) -> None:
    org = compute_org_bill(published_lake, PERIOD, ("cluster", "team"))
    unallocated = {r["cluster"]: r for r in org.lines.iter_rows(named=True) if r["team"] == "unallocated"}
    assert unallocated["east"]["redistributed_cost"] == 0  # policy none
    for name in ("west", "lab"):  # proportional, even: the unallocated cost moved to the teams
        row = unallocated[name]
        assert row["list_cost"] > 0
        assert to_cents(row["cost"]) == 0
        assert to_cents(row["redistributed_cost"]) == -to_cents(row["list_cost"] - row["sharing_discount"] + row["utilization_adjustment"])


def test_team_alias_rolls_up_by_name(published_lake: Lake) -> None:
    plain = compute_org_bill(published_lake, PERIOD, ("cluster", "team"))
    settings = LakeSettings(team_aliases={"vision": SHARED_TEAM, "lab/biology": "bio"})
    renamed = compute_org_bill(published_lake, PERIOD, ("cluster", "team"), settings=settings)
    rows = {(r["cluster"], r["team"]): r for r in plain.lines.iter_rows(named=True)}
    got = {(r["cluster"], r["team"]): r for r in renamed.lines.iter_rows(named=True)}
    assert ("east", "vision") not in got and ("lab", "biology") not in got
    assert to_cents(got[("lab", "bio")]["cost"]) == to_cents(rows[("lab", "biology")]["cost"])
    merged = to_cents(rows[("east", "vision")]["cost"]) + to_cents(rows[("east", SHARED_TEAM)]["cost"])
    assert to_cents(got[("east", SHARED_TEAM)]["cost"]) == merged
    assert to_cents(renamed.fleet_cost) == to_cents(plain.fleet_cost)


def test_lines_hold_every_value_column(published_lake: Lake) -> None:
    org = compute_org_bill(published_lake, PERIOD, ("cluster", "team"))
    for col in LINE_VALUES:
        assert col in org.lines.columns
    payload = org.to_dict()
    assert payload["schema"] == "gpuledger.org-bill/v1" and len(payload["lines"]) == org.lines.height


def test_tampered_detail_is_refused(published_lake: Lake, tmp_path: Path) -> None:
    lake = copy_lake(published_lake, tmp_path / "copy")
    folder = Path(lake.root) / "cluster=west" / f"period={PERIOD}"
    detail = next(folder.glob("bill_detail-*.parquet"))
    data = bytearray(detail.read_bytes())
    data[len(data) // 2] ^= 0xFF
    detail.write_bytes(bytes(data))
    with pytest.raises(LakeError, match="checksum"):
        compute_org_bill(lake, PERIOD, ("team",))


def test_bad_requests_are_one_line(published_lake: Lake) -> None:
    with pytest.raises(InputError, match="unknown dimension 'colour'"):
        compute_org_bill(published_lake, PERIOD, ("colour",))
    with pytest.raises(LakeError, match="no cluster has published 2024-10"):
        compute_org_bill(published_lake, "2024-10", ("team",))
    with pytest.raises(LakeError, match="no cluster 'north'"):
        compute_org_bill(published_lake, PERIOD, ("team",), clusters=("north",))


def test_engine_sums_are_the_bill_sums() -> None:
    from gpuledger.analytics.billing.lines import SUMS
    from gpuledger.warehouse.lake.org_sql import SUM_COLUMNS

    assert tuple(SUM_COLUMNS) == tuple(SUMS)
