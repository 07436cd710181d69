"""The org statement (`report monthly --lake`) from the local lake.

- org-summary.csv holds the org bill at cluster x team x model x sharing mode; its costs add up
  to the sum of the clusters' own fleet costs (their bills computed from their warehouses);
- org-teams.csv rolls the shared team up across clusters;
- the org FOCUS file is every cluster's published FOCUS rows: its BilledCost sums, per cluster,
  to that cluster's fleet cost, and in all to the org's;
- the manifest names every file's sha256 and each partition it was built from.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from gpuledger.analytics.billing.money import to_cents
from gpuledger.reports.lake_org import write_org_statement
from gpuledger.warehouse.lake.location import Lake
from tests.lake.fleets import CLUSTERS, PERIOD, SHARED_TEAM


def test_org_statement(published_lake: Lake, reference_bills, tmp_path: Path) -> None:
    result = write_org_statement(published_lake, PERIOD, tmp_path)
    fleet = {c.name: to_cents(reference_bills[(c.name, ("team",))].fleet_cost) for c in CLUSTERS}
    summary = pl.read_csv(result.folder / "org-summary.csv")
    assert sum(to_cents(v) for v in summary["cost"].to_list()) == sum(fleet.values())
    teams = pl.read_csv(result.folder / "org-teams.csv")
    shared = teams.filter(pl.col("team") == SHARED_TEAM)
    expected = sum(
        to_cents(r["cost"]) for c in CLUSTERS
        for r in reference_bills[(c.name, ("team",))].lines.iter_rows(named=True) if r["team"] == SHARED_TEAM
    )
    assert to_cents(shared["cost"][0]) == expected
    focus = pl.read_parquet(result.folder / "focus.parquet")
    per_cluster = focus.group_by("x_Cluster").agg(pl.col("BilledCost").cast(pl.Float64).sum())
    for row in per_cluster.iter_rows(named=True):
        assert to_cents(row["BilledCost"]) == fleet[row["x_Cluster"]]
    manifest = json.loads((result.folder / "manifest.json").read_text())
    assert [p["cluster"] for p in manifest["partitions"]] == sorted(fleet)
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((result.folder / name).read_bytes()).hexdigest() == digest
    again = write_org_statement(published_lake, PERIOD, tmp_path)  # rewriting replaces in place
    assert (again.folder / "manifest.json").read_text() == (result.folder / "manifest.json").read_text()
