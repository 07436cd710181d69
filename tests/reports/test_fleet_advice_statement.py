"""The fleet statement's "Fleet advice" section (issue #19: advice appears on the statements).

Cases:
- on the small simulated fleet (MIG, time-slice and serving pools), the fleet statement's PDF
  text (poppler's pdftotext) names, for each row kind, the top rows (at most 3, largest saving
  first; spaces and hyphens ignored: cells wrap
  and pdftotext joins a word broken at a hyphen) that `gpuledger recommend --kind K -o json` returns for the same month, run as a
  separate process; team statements carry no such section;
- a warehouse whose fleet gives no advice row (one exclusive training pool) renders no
  "Fleet advice" heading at all, not an empty section.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.reports.monthly import issue_monthly
from gpuledger.warehouse import LoadBatch, Warehouse

PERIOD = "2024-11"
KINDS = ("profile-catalog", "fragmentation", "overcommit", "autoscaling")
NOW = datetime(2024, 12, 2, tzinfo=UTC)


def _pdf_text(path: Path) -> str:
    out = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return " ".join(out.split())


def _squeeze(text: str) -> str:
    return "".join(text.split()).replace("-", "")


def _cli_rows(warehouse: Path, tmp: Path) -> list[dict]:
    cfg = tmp / "cfg.yaml"
    cfg.write_text("{}\n")
    kinds = [a for k in KINDS for a in ("--kind", k)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run(
        [sys.executable, "-m", "gpuledger", "recommend", "--warehouse", str(warehouse), "--config", str(cfg),
         "--start", "2024-11-01T00:00:00+00:00", "--end", "2024-12-01T00:00:00+00:00", *kinds, "-o", "json"],
        capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["recommendations"]


def test_fleet_statement_names_the_cli_advice(base_warehouse: Path, tmp_path: Path) -> None:
    rows = _cli_rows(base_warehouse, tmp_path)
    per_kind: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        per_kind[r["kind"]].append(r)
    assert len(per_kind) >= 2, rows  # the fleet has advice of several kinds to show
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        result = issue_monthly(wh, Settings(), PERIOD, tmp_path / "out", now=NOW)
    text = _pdf_text(result.folder / "statements" / "fleet.pdf")
    section = _squeeze(text[text.index("Fleet advice"):])
    for kind, found in per_kind.items():
        found.sort(key=lambda r: (r["monthly_saving"] is None, -(r["monthly_saving"] or 0), r["scope"]))
        for r in found[:3]:
            assert _squeeze(r["scope"]) in section, (kind, r["scope"])
            amount = "notpriced" if r["monthly_saving"] is None else _squeeze(f"{r['monthly_saving']:,.2f}")
            assert amount in section, (kind, r)  # a risk row's unknown saving is never "0.00"
        assert section.count(kind) == min(3, len(found)), kind
    for team in result.totals["teams"]:
        assert "Fleet advice" not in _pdf_text(result.folder / "statements" / f"team-{team}.pdf")


def test_no_advice_no_section(tmp_path: Path) -> None:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    spec = FleetSpec.parse({"gpus_per_node": 2, "pools": [
        {"name": "train", "model": "H100-80GB", "sharing": "exclusive", "nodes": 2,
         "workloads": {"training": 1.0}}]})
    window = Window(datetime(2024, 11, 3, tzinfo=UTC), datetime(2024, 11, 5, tzinfo=UTC), timedelta(minutes=5))
    sim = Simulation(spec, window, seed=3)
    path = tmp_path / "w.duckdb"
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for sub, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=sub))
    assert _cli_rows(path, tmp_path) == []  # the premise: nothing to advise
    with Warehouse.open(path, read_only=True) as wh:
        result = issue_monthly(wh, Settings(), PERIOD, tmp_path / "out", now=NOW)
    html = (result.folder / "statements" / "fleet.html").read_text()
    assert "Fleet advice" not in html and "fleet-advice" not in html
    assert "Recommendations" in _pdf_text(result.folder / "statements" / "fleet.pdf")


def test_advice_handed_in_is_used_and_equal(base_warehouse: Path) -> None:
    """The demo hands the kinds it printed to the report: the statement's rows equal what the
    report computes on its own, and the handed rows are the ones used (a changed saving shows),
    with a kind not handed in still computed."""
    from dataclasses import replace

    from gpuledger.analytics.advice.run import run_advice
    from gpuledger.reports.fleet_advice import fleet_advice

    window = Window(datetime(2024, 11, 1, tzinfo=UTC), datetime(2024, 12, 1, tzinfo=UTC))
    settings = Settings()
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        alone = fleet_advice(wh, window, settings)
        every = run_advice(wh, window, settings, ())
        assert fleet_advice(wh, window, settings, every) == alone
        kinds_with_rows = [a for a in every if a.kind in KINDS and a.rows]
        assert kinds_with_rows, "the fleet has advice to hand over"
        first = kinds_with_rows[0]
        doctored = replace(first, rows=[{**r, "monthly_saving": 1e9} for r in first.rows[:1]])
        handed = fleet_advice(wh, window, settings, [doctored])
    assert [a for a in handed if a.monthly_saving == 1e9]
    assert {a.kind for a in handed} - {a.kind for a in handed if a.monthly_saving == 1e9} == \
        {a.kind for a in alone} - {str(r["kind"]) for r in first.rows}


def test_a_report_reads_the_months_allocations_once(base_warehouse: Path, monkeypatch) -> None:
    """The report's recommendations and its profile catalog share one read of the month's
    per-allocation usage (issue 34: at 1,000 GPUs the heaviest query of the report, read twice)."""
    from gpuledger.analytics.workloads import recommend, requested
    from gpuledger.reports import compose

    reads: list[Window] = []
    read = requested.workload_usage

    def counted(wh: Warehouse, window: Window, *args: object, **kwargs: object) -> object:
        reads.append(window)
        return read(wh, window, *args, **kwargs)  # type: ignore[arg-type]

    for module in (compose, recommend, requested):  # every name a report could read it through
        monkeypatch.setattr(module, "workload_usage", counted)
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        data = compose.gather(wh, Settings(), PERIOD)
    assert data.recommendations, "the month has recommendations to make"
    assert reads == [Window(datetime(2024, 11, 1, tzinfo=UTC), datetime(2024, 12, 1, tzinfo=UTC))]


def test_a_handed_month_is_used_only_under_the_reports_rules(base_warehouse: Path, monkeypatch) -> None:
    """The demo hands the report the month's analyses it has computed (0256): under the
    report's own rules the report reads no usage, and its recommendations and advice are the
    handed ones (a doctored saving shows); handed under other rules, the report computes its
    own (equal to a report handed nothing)."""
    from dataclasses import replace

    from gpuledger.analytics.advice.month import MonthAnalyses
    from gpuledger.analytics.advice.run import run_advice
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.workloads import recommend, requested
    from gpuledger.core.rules import Rules
    from gpuledger.reports import compose

    settings = Settings()
    window = Window(datetime(2024, 11, 1, tzinfo=UTC), datetime(2024, 12, 1, tzinfo=UTC))
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        bill = compute_bill(wh, window, settings)
        usage = requested.workload_usage(wh, window, settings, bill)
        found = recommend.recommend(wh, window, settings, bill=bill, usage=usage)
        advice = tuple(run_advice(wh, window, settings, (), bill=bill, usage=usage))
        alone = compose.gather(wh, settings, PERIOD)
        doctored = replace(found, recommendations=found.recommendations.head(1).with_columns(
            monthly_saving=pl.lit(1e9)))
        month = MonthAnalyses(bill, usage, doctored, advice)
        other_rules = Rules.of(Settings.model_validate({"idle": {"activity": "gpu_util"}}))
        reads: list[Window] = []
        read = requested.workload_usage

        def counted(wh: Warehouse, window: Window, *args: object, **kwargs: object) -> object:
            reads.append(window)
            return read(wh, window, *args, **kwargs)  # type: ignore[arg-type]

        for module in (compose, recommend, requested):
            monkeypatch.setattr(module, "workload_usage", counted)
        handed = compose.gather(wh, settings, PERIOD, month=month)
        assert reads == []
        elsewhere = compose.gather(wh, settings, PERIOD, month=replace(
            month, bill=replace(bill, rules=other_rules)))
        assert len(reads) == 1
    assert [r.monthly_savings for r in handed.recommendations] == [1e9]
    assert handed.advice == alone.advice and alone.advice
    assert elsewhere.recommendations == alone.recommendations and elsewhere.advice == alone.advice
