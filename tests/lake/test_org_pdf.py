"""`report monthly --lake`: the org statement PDF, read back with poppler's pdftotext.

- the command (run as a user runs it) writes the same files as `org report` (one
  implementation): the CSVs, the org FOCUS file and `org-statement.pdf`, all in the manifest;
- the PDF names every cluster and every team each cluster billed (none folded), with each
  cluster's fleet cost as that cluster's own bill computed it from its warehouse;
- its reconciliation says, per cluster, team charges + special lines = fleet cost, and the
  clusters add up to the org total; the figures are checked against the cluster bills;
- cluster-only flags (`--finalize`) with `--lake` are one line, exit non-zero.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from gpuledger.analytics.billing.money import to_cents
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.warehouse.lake.location import Lake
from tests.lake.fleets import CLUSTERS, PERIOD
from tests.lake.test_cli import gl


def pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout


def _amount(text: str) -> int:
    return to_cents(float(text.replace(",", "")))


def test_report_monthly_lake_writes_org_pdf(published_lake: Lake, reference_bills, tmp_path: Path) -> None:
    out = gl("report", "monthly", "--lake", str(published_lake.root), "--period", PERIOD, "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "org" / f"period={PERIOD}"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert {"org-statement.pdf", "org-summary.csv", "org-teams.csv", "focus.parquet"} <= set(manifest["files"])
    text = pdf_text(folder / "org-statement.pdf")
    flat = re.sub(r"\s+", " ", text)
    fleet = {c.name: to_cents(reference_bills[(c.name, ("team",))].fleet_cost) for c in CLUSTERS}
    for case in CLUSTERS:
        own = reference_bills[(case.name, ("team",))].lines
        billed = [t for t in own["team"].to_list() if t not in SPECIAL_LINES]
        for team in billed:
            assert re.search(rf"\b{case.name}\s+{re.escape(team)}\s", text), (case.name, team)
        line = re.search(rf"{case.name}: team charges ([\d,.]+) .*?= fleet cost ([\d,.]+)", flat)
        assert line is not None, case.name
        teams_cents = sum(to_cents(c) for t, c in zip(own["team"].to_list(), own["cost"].to_list(), strict=True)
                          if t not in SPECIAL_LINES)
        assert _amount(line.group(1)) == teams_cents
        assert _amount(line.group(2)) == fleet[case.name]
    total = re.search(r"= org total ([\d,.]+)", flat)
    assert total is not None and _amount(total.group(1)) == sum(fleet.values())
    # `org report` is the same implementation: the same manifest, byte for byte.
    again = gl("org", "report", "--lake", str(published_lake.root), "--period", PERIOD, "--out", str(tmp_path / "b"))
    assert again.returncode == 0, again.stderr
    other = json.loads((tmp_path / "b" / "org" / f"period={PERIOD}" / "manifest.json").read_text())
    assert other["files"] == manifest["files"]


def test_report_monthly_lake_refuses_cluster_flags(published_lake: Lake, tmp_path: Path) -> None:
    out = gl("report", "monthly", "--lake", str(published_lake.root), "--period", PERIOD, "--finalize",
             "--out", str(tmp_path))
    assert out.returncode != 0
    assert "--finalize applies to a cluster's own report" in out.stderr
    assert "Traceback" not in out.stderr
