"""Issue 31 item 7: a finalized month stays closed, and `report verify` compares its numbers.

Cases:
- November rolled up as `collect` rolls it up when collection stops at its end (the last hours
  provisional: computed without the samples after them): finalize is refused in one line naming
  the provisional hours and where to collect to (today: issued, and collecting December then
  re-rolls those hours and changes November's bill under the issue); once December's first day
  is collected it is issued, and collecting the rest of December leaves November's bill equal
  to the issue to the cent, which `report verify` confirms;
- `report verify` bills the month again: after a day of an issued November changes in the
  warehouse it fails (exit 1) naming the lines that differ and their gross difference, which the
  test computes itself from the issued summary.csv and the warehouse's bill (today: "every issued version ... matches");
  once December is finalized carrying the difference as adjustments, it passes again.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.collect_rollup import Roller, RollupPlan
from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window
from gpuledger.reports.billing import month_bill, summary_lines
from gpuledger.reports.monthly import issue_monthly
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.reports.fleet import load

pytestmark = pytest.mark.slow
NOV, DEC = "2024-11", "2024-12"
DEC_1 = datetime(2024, 12, 1, tzinfo=UTC)
AFTER_NOV = datetime(2024, 12, 2, tzinfo=UTC)
AFTER_DEC = datetime(2025, 1, 2, tzinfo=UTC)


def _verify(path: Path, out: Path, period: str) -> int:
    return main(["--warehouse", str(path), "report", "verify", "--period", period, "--out", str(out)])


def _lines(wh: Warehouse, period: str) -> pl.DataFrame:
    return summary_lines(month_bill(wh, Settings(), period)).select("team", "model", "sharing_mode", "cost")


def test_provisional_month_end_not_finalized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out, settings = tmp_path / "w.duckdb", tmp_path / "out", Settings()
    load(path, until=DEC_1)
    with Warehouse.open(path) as wh:
        Roller(wh, settings, RollupPlan(), datetime(2024, 11, 1, tzinfo=UTC)).advance(DEC_1, DEC_1)
        margin = SamplingRules.of(settings).margin  # the exact hours end a margin before the data
        settled = (DEC_1 - margin).replace(minute=0, second=0, microsecond=0)
        with pytest.raises(ReportError, match=f"roll-up from {settled:%Y-%m-%d %H:%M} UTC is provisional"
                           ) as refused:
            issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
        message = str(refused.value)
        assert "\n" not in message and f"collect to {DEC_1 + margin:%Y-%m-%d %H:%M} UTC" in message
    load(path, since=DEC_1, until=DEC_1 + timedelta(days=1), inventory=False)  # the next collect
    with Warehouse.open(path) as wh:
        Roller(wh, settings, RollupPlan(), DEC_1).advance(AFTER_NOV, AFTER_NOV)
        issued = issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
        at_issue = _lines(wh, NOV)
    load(path, since=DEC_1 + timedelta(days=1), inventory=False)  # the rest of December
    with Warehouse.open(path) as wh:
        Roller(wh, settings, RollupPlan(), DEC_1).advance(AFTER_DEC - timedelta(days=1), AFTER_DEC - timedelta(days=1))
        assert wh.watermark("card_hours_hourly") == datetime(2025, 1, 1, tzinfo=UTC)
        now = _lines(wh, NOV)
    assert now.equals(at_issue)
    file = pl.read_csv(issued.folder / "summary.csv", schema_overrides={"model": pl.String,
                                                                          "sharing_mode": pl.String})
    assert file["cost"].sum() == pytest.approx(now["cost"].sum(), abs=0.005)
    capsys.readouterr()
    assert _verify(path, out, NOV) == 0
    assert "the warehouse bills the month as issued" in capsys.readouterr().out


def test_verify_bills_the_month_again(warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, settings = tmp_path / "out", Settings()
    with Warehouse.open(warehouse) as wh:
        v1 = issue_monthly(wh, settings, NOV, out, finalize=True, now=AFTER_NOV)
    assert _verify(warehouse, out, NOV) == 0
    day = Window(datetime(2024, 11, 10, tzinfo=UTC), datetime(2024, 11, 11, tzinfo=UTC), timedelta(minutes=5))
    with Warehouse.open(warehouse) as wh:  # a day of the issued month changes: its samples gone
        empty = wh.query("SELECT * FROM gpu_samples WHERE ts >= ? AND ts < ?", [day.start, day.end]).clear()
        wh.load(LoadBatch({"gpu_samples": empty}, window=day))
        now = _lines(wh, NOV)
    issued = pl.read_csv(v1.folder / "summary.csv", schema_overrides={"model": pl.String, "sharing_mode": pl.String})
    key = ["team", "model", "sharing_mode"]
    delta = (now.join(issued.filter(pl.col("line") != "adjustment").select(*key, pl.col("cost").alias("was")),
                      on=key, how="full", coalesce=True, nulls_equal=True)
             .fill_null(0.0).with_columns((pl.col("cost") - pl.col("was")).alias("d"))
             .filter(pl.col("d").abs() >= 0.005))
    gross = delta["d"].abs().sum()  # the day's cost moved from the teams to unallocated capacity
    assert gross > 1.0
    capsys.readouterr()
    assert _verify(warehouse, out, NOV) == 1
    said = capsys.readouterr()
    err = said.out + said.err
    assert "billed again from the warehouse now" in err and f"{delta.height} line(s) differ" in err, err
    assert f"gross {gross:,.2f}" in err, err
    with Warehouse.open(warehouse) as wh:
        issue_monthly(wh, settings, DEC, out, finalize=True, now=AFTER_DEC)  # carries the adjustments
    assert _verify(warehouse, out, NOV) == 0
