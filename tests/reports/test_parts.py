"""Report parts that need no bill: manifests, layout, chart axis, schedule calendar, CLI flags.

Cases:
- a manifest lists every file with its sha256; editing, deleting or adding a file is reported
- only folders with a *final* manifest count as issued versions (drafts and staging do not)
- team names become safe file names
- chart ticks are round 1-2-2.5-5 steps that cover the maximum; the SVG has one bar group per day
- completed periods honour the grace time after a month ends and the backfill count
- `report monthly --reason` without `--reissue`, and `--reissue` without a reason, are refused
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest

from gpuledger.cli import main
from gpuledger.core.errors import InputError
from gpuledger.reports.chart import DayCost, daily_cost_svg, nice_ticks
from gpuledger.reports.layout import issued_versions, safe_name
from gpuledger.reports.manifest import build_manifest, verify_folder, write_manifest
from gpuledger.reports.schedule import completed_periods


def _seal(folder, status="final", version=1):
    manifest = build_manifest(
        folder, period="2026-11", status=status, version=version,
        generated_at=datetime(2026, 12, 1, tzinfo=UTC), price_book_version="abc",
        inputs_sha256="0" * 64, totals={"fleet_cost": 1.0},
    )
    write_manifest(folder, manifest)
    return manifest


def test_manifest_lists_files_and_detects_changes(tmp_path):
    folder = tmp_path / "v1"
    (folder / "statements").mkdir(parents=True)
    (folder / "summary.csv").write_text("a,b\n1,2\n")
    (folder / "statements" / "fleet.html").write_text("<html></html>")
    manifest = _seal(folder)
    assert [f["path"] for f in manifest["files"]] == ["statements/fleet.html", "summary.csv"]
    assert json.loads((folder / "manifest.json").read_text())["files"][1]["bytes"] == 8
    assert verify_folder(folder) == []

    (folder / "summary.csv").write_text("a,b\n1,3\n")
    (folder / "extra.txt").write_text("x")
    (folder / "statements" / "fleet.html").unlink()
    problems = verify_folder(folder)
    assert any("summary.csv: sha256 differs" in p for p in problems)
    assert any("fleet.html: listed in the manifest but missing" in p for p in problems)
    assert any("extra.txt: not listed" in p for p in problems)


def test_only_final_manifests_count_as_issued(tmp_path):
    base = tmp_path / "period=2026-11"
    for name, status in (("v1", "final"), ("v2", "final"), ("draft", "draft"), (".staging-x", "final")):
        (base / name).mkdir(parents=True)
        _seal(base / name, status=status)
    (base / "v3").mkdir()  # a folder without a manifest is not an issue
    assert sorted(issued_versions(tmp_path, "2026-11")) == [1, 2]
    assert issued_versions(tmp_path, "2026-10") == {}


def test_safe_names():
    assert safe_name("ml/research team") == "ml_research_team"
    assert safe_name("nlp") == "nlp"
    assert safe_name("../..") == "_"


def test_chart_ticks_and_bars():
    assert nice_ticks(430) == [0, 200, 400, 600]
    ticks = nice_ticks(0.37)
    assert ticks[0] == 0 and ticks[-1] >= 0.37 and len(ticks) <= 6
    for top in (1, 7.5, 99, 12345):
        ticks = nice_ticks(top)
        assert ticks[-1] >= top and ticks[-2] < top
    days = [DayCost(date(2026, 11, 1) + timedelta(days=i), 10.0 * i, 2.0) for i in range(30)]
    svg = daily_cost_svg(days, "EUR")
    assert svg.count("<g><title>") == 30
    assert "2026-11-30: 290.00 EUR (2.00 idle)" in svg
    assert "no usage" in daily_cost_svg([], "EUR")


@pytest.mark.parametrize(
    ("now", "grace_h", "count", "expected"),
    [
        (datetime(2026, 12, 1, 7, tzinfo=UTC), 6, 1, ["2026-11"]),
        (datetime(2026, 12, 1, 5, tzinfo=UTC), 6, 1, ["2026-10"]),   # November not settled yet
        (datetime(2026, 12, 1, 0, tzinfo=UTC), 0, 1, ["2026-11"]),   # end-exclusive month
        (datetime(2027, 1, 15, tzinfo=UTC), 6, 3, ["2026-10", "2026-11", "2026-12"]),
    ],
)
def test_completed_periods(now, grace_h, count, expected):
    assert completed_periods(now, timedelta(hours=grace_h), count) == expected


def test_reissue_flags_are_checked(tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    assert main(["--warehouse", str(wh), "report", "monthly", "--period", "2026-11",
                 "--reason", "x"]) == InputError.exit_code
    assert "--reason goes with --reissue" in capsys.readouterr().err
    assert main(["--warehouse", str(wh), "report", "monthly", "--period", "2026-11",
                 "--reissue"]) == InputError.exit_code
    assert "--reissue needs --reason" in capsys.readouterr().err
    assert main(["--warehouse", str(wh), "report", "monthly", "--period", "2026-13"]) == InputError.exit_code
    assert "expected YYYY-MM" in capsys.readouterr().err
