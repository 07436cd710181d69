"""Finalize, reissue, late data and scheduling: issued numbers never change silently.

Cases:
- finalize is refused before the month ends; a reissue with nothing issued is refused
- finalize writes v1 (read-only files), records it in `report_issues`/`report_lines` and the
  audit log; a second finalize (CLI) refuses and names v1; `--reissue --reason` writes v2 beside
  v1, records the reason, and leaves every byte of v1 as it was
- `report verify` passes, then fails once a finalized file is edited
- late data: a month with 20 of 30 days collected is refused below `min_coverage`, finalized
  with `allow_partial`; samples of an issued month arriving afterwards leave its v1 untouched, a draft of
  that month says the numbers moved, and the next month's report carries adjustment lines equal
  to (bill now - issued lines), computed here independently from v1's summary.csv; in FOCUS they
  are `Correction` rows with the issued month's charge period; once that report is finalized
  nothing is billed twice, and a reissue that includes the late data turns it into a credit
- the schedule issues each completed month once: a second call, a "restart", a crash between
  the rename and the warehouse record, and a lost output folder never issue a month again; it
  waits for the grace time and skips months without usage
"""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.command_context import Context
from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.window import Window
from gpuledger.reports.adjustments import adjustments_for
from gpuledger.reports.billing import SUMMARY_BY, month_bill, summary_lines
from gpuledger.reports.manifest import sha256_file, verify_folder
from gpuledger.reports.monthly import issue_monthly
from gpuledger.reports.recovery import verify_issues
from gpuledger.reports.schedule import due_periods, run_due
from gpuledger.warehouse import LoadBatch, Warehouse

pytestmark = pytest.mark.slow

NOV, DEC = "2024-11", "2024-12"
AFTER_NOV = datetime(2024, 12, 2, tzinfo=UTC)
AFTER_DEC = datetime(2025, 1, 2, tzinfo=UTC)


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in folder.rglob("*") if p.is_file()}


def _summary(path):
    return pl.read_csv(path, schema_overrides={"model": pl.String, "sharing_mode": pl.String})


def test_finalize_and_reissue(warehouse, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--warehouse", str(warehouse), "report", "monthly", "--period", NOV, "--out", str(out)]
    with Warehouse.open(warehouse) as wh:
        with pytest.raises(ReportError, match="not over until 2024-12-01"):
            issue_monthly(wh, Settings(), NOV, out, finalize=True, now=datetime(2024, 11, 20, tzinfo=UTC))
        with pytest.raises(ReportError, match="nothing to reissue"):
            issue_monthly(wh, Settings(), NOV, out, reissue_reason="typo", now=AFTER_NOV)
        first = issue_monthly(wh, Settings(), NOV, out, finalize=True, now=AFTER_NOV)
    v1 = out / "period=2024-11" / "v1"
    assert first.folder == v1 and first.version == 1
    assert all(not p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
               for p in v1.rglob("*") if p.is_file())
    before = _snapshot(v1)

    assert main([*args, "--finalize"]) == 1
    assert "already finalized as v1" in capsys.readouterr().err
    assert main([*args, "--reissue", "--reason", "price book corrected"]) == 0
    v2 = out / "period=2024-11" / "v2"
    manifest = json.loads((v2 / "manifest.json").read_text())
    assert (manifest["status"], manifest["version"], manifest["reason"], manifest["supersedes"]) == (
        "final", 2, "price book corrected", 1)
    assert _snapshot(v1) == before and verify_folder(v1) == []

    with Warehouse.open(warehouse, read_only=True) as wh:
        issues = wh.query("SELECT version, reason, fleet_cost, manifest_sha256 FROM report_issues "
                          "WHERE period = ? ORDER BY version", [NOV]).rows()
        lines = wh.query("SELECT version, count(*) FROM report_lines WHERE period = ? GROUP BY 1 ORDER BY 1",
                         [NOV]).rows()
        audit = wh.query("SELECT action, object FROM audit_log ORDER BY seq").rows()
    assert [(v, r) for v, r, _, _ in issues] == [(1, None), (2, "price book corrected")]
    assert issues[0][2] == pytest.approx(720 * 26.0) and issues[0][3] == sha256_file(v1 / "manifest.json")
    rows = _summary(v1 / "summary.csv").height
    assert lines == [(1, rows), (2, rows)]
    assert audit == [("finalize", "report period=2024-11 v1"), ("reissue", "report period=2024-11 v2")]

    verify = ["--warehouse", str(warehouse), "report", "verify", "--period", NOV, "--out", str(out)]
    assert main(verify) == 0
    edited = v1 / "summary.csv"
    edited.chmod(0o644)
    edited.write_text(edited.read_text().replace("nlp", "NLP", 1))
    assert main(verify) == 1
    assert "problem(s) with the issued report" in capsys.readouterr().err
    with Warehouse.open(warehouse, read_only=True) as wh:
        problems = verify_issues(wh, out, NOV)
    assert len(problems) == 1 and "v1/summary.csv: sha256 differs" in problems[0]


def test_late_data_becomes_an_adjustment(warehouse, tmp_path):
    out, settings = tmp_path / "out", Settings()
    cut, end = datetime(2024, 11, 21, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)
    late = Window(cut, end, timedelta(minutes=5))
    with Warehouse.open(warehouse) as wh:
        held = wh.query("SELECT * FROM gpu_samples WHERE ts >= ?", [cut])
        wh.load(LoadBatch({"gpu_samples": held.clear()}, window=late))   # samples not there yet
        with pytest.raises(ReportError, match=r"only 480 of 720 hours \(66.7%\) have samples"):
            issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
        issue_monthly(wh, settings, NOV, out, finalize=True, allow_partial=True, now=AFTER_NOV)
        v1 = out / "period=2024-11" / "v1"
        issued = _summary(v1 / "summary.csv")
        before = _snapshot(v1)

        wh.load(LoadBatch({"gpu_samples": held}, window=late))          # the late data arrives
        draft = issue_monthly(wh, settings, NOV, out, now=AFTER_DEC)
        assert any(n.startswith("Late data:") and "2024-12 report" in n for n in draft.notes)
        assert _snapshot(v1) == before

        december = issue_monthly(wh, settings, DEC, out, finalize=True, now=AFTER_DEC)
        now_nov = summary_lines(month_bill(wh, settings, NOV))
        # Independent expectation: November now minus November as issued, per line.
        key = list(SUMMARY_BY)
        expected = (
            now_nov.select(*key, pl.col("cost").alias("now"), pl.col("card_hours").alias("h_now"))
            .join(issued.select(*key, pl.col("cost").alias("was"), pl.col("card_hours").alias("h_was")),
                  on=key, how="full", coalesce=True, nulls_equal=True)
            .fill_null(0.0)
            .with_columns((pl.col("now") - pl.col("was")).alias("delta"),
                          (pl.col("h_now") - pl.col("h_was")).alias("h_delta"))
            .filter((pl.col("delta").abs() >= 0.005) | (pl.col("h_delta").abs() >= 0.001))
        )
        assert expected.height > 0
        dec_summary = _summary(december.folder / "summary.csv")
        adjust = dec_summary.filter(pl.col("line") == "adjustment")
        assert set(adjust["for_period"]) == {NOV} and adjust.height == expected.height
        got = {(r["team"], r["model"], r["sharing_mode"]): r["cost"] for r in adjust.iter_rows(named=True)}
        for r in expected.iter_rows(named=True):
            assert got[(r["team"], r["model"], r["sharing_mode"])] == pytest.approx(r["delta"], abs=0.005)
        # Late usage moved cost from unallocated capacity to the teams that held the cards.
        assert adjust.filter(pl.col("team") == "unallocated")["cost"].sum() < 0
        assert adjust.filter(pl.col("line") == "adjustment", ~pl.col("team").is_in(
            ["unallocated", "unattributed", "sharing_discount"]))["card_hours"].sum() > 0
        own = dec_summary.filter(pl.col("line") != "adjustment")
        dec_fleet = month_bill(wh, settings, DEC).fleet_cost
        assert dec_fleet == pytest.approx(744 * 26.0, abs=5.0)  # 10 cards x 744 h (data ends at 2025)
        assert own["cost"].sum() == pytest.approx(dec_fleet, abs=0.005)
        assert dec_summary["cost"].sum() == pytest.approx(dec_fleet + adjust["cost"].sum(), abs=0.005)

        focus = pl.read_parquet(december.folder / "focus.parquet")
        corrections = focus.filter(pl.col("ChargeClass") == "Correction")
        assert corrections.height == adjust.height
        assert set(corrections["ChargeCategory"]) == {"Usage"}
        assert set(corrections["ChargePeriodStart"]) == {datetime(2024, 11, 1, tzinfo=UTC)}
        assert set(corrections["ChargePeriodEnd"]) == {datetime(2024, 12, 1, tzinfo=UTC)}
        assert set(corrections["BillingPeriodStart"]) == {datetime(2024, 12, 1, tzinfo=UTC)}
        assert set(corrections["x_CorrectedPeriod"]) == {NOV}
        assert float(corrections["BilledCost"].cast(pl.Float64).sum()) == pytest.approx(adjust["cost"].sum(), abs=0.01)
        assert float(focus["BilledCost"].cast(pl.Float64).sum()) == pytest.approx(dec_summary["cost"].sum(), abs=0.01)
        statement = (december.folder / "statements" / "fleet.html").read_text()
        assert "Adjustments for issued months" in statement

        # Billed once: after December is issued, January owes nothing more for November...
        assert adjustments_for(wh, settings, "2025-01").height == 0
        # ...and a reissue of November that includes the late data makes January credit it back.
        issue_monthly(wh, settings, NOV, out, reissue_reason="late samples", now=AFTER_DEC)
        credit = adjustments_for(wh, settings, "2025-01")
        back = {(r["team"], r["model"], r["sharing_mode"]): r["cost"] for r in credit.iter_rows(named=True)}
        assert set(back) == set(got)
        for line, cost in got.items():
            assert back[line] == pytest.approx(-cost, abs=0.005)
    assert _snapshot(v1) == before


def test_schedule_issues_each_month_once(warehouse, tmp_path):
    out, settings = tmp_path / "out", Settings()
    tick = datetime(2024, 12, 1, 7, tzinfo=UTC)
    assert run_due(settings, warehouse, out, datetime(2024, 12, 1, 3, tzinfo=UTC)) == []  # grace: Oct only
    assert not (out / "period=2024-10").exists()
    issued = run_due(settings, warehouse, out, tick)
    assert issued == [out / "period=2024-11" / "v1"]
    sealed = _snapshot(issued[0])
    ctx = Context(settings=Settings(), warehouse_path=warehouse)            # a restarted process
    assert run_due(ctx, warehouse, out, tick + timedelta(hours=1)) == []
    assert run_due(ctx, warehouse, out, tick + timedelta(days=20)) == []

    # A crash after the folder was renamed into place, before the warehouse recorded it.
    with Warehouse.open(warehouse) as wh:
        wh.con.execute("DELETE FROM report_lines")
        wh.con.execute("DELETE FROM report_issues")
    assert run_due(ctx, warehouse, out, tick + timedelta(days=21)) == []
    with Warehouse.open(warehouse, read_only=True) as wh:
        assert wh.query("SELECT version, manifest_sha256 FROM report_issues").rows() == [
            (1, sha256_file(issued[0] / "manifest.json"))]
        assert wh.scalar("SELECT count(*) FROM report_lines") == _summary(issued[0] / "summary.csv").height

    # The output folder lost: the warehouse still knows November was issued.
    moved = tmp_path / "elsewhere"
    out.rename(moved)
    assert run_due(ctx, warehouse, out, tick + timedelta(days=22)) == []
    assert _snapshot(moved / "period=2024-11" / "v1") == sealed

    # January: December is due; with a backfill of 2 November is not due again.
    with Warehouse.open(warehouse, read_only=True) as wh:
        january = datetime(2025, 1, 1, 7, tzinfo=UTC)
        assert due_periods(wh, settings, moved, january, backfill=2) == [DEC]
        assert due_periods(wh, settings, moved, january) == [DEC]
        assert due_periods(wh, settings, moved, january - timedelta(hours=2), backfill=2) == ["2024-10"]
