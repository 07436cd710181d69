"""Finance-grade statements on a fleet of 13 teams (more than any statement table used to show).

Cases:
- the fleet statement's PDF text (poppler's pdftotext) names every billed team (none folded into
  "n more"), and its reconciliation block's parts (team charges + absorbed sharing discount +
  unallocated + unattributed) add up to the fleet cost printed beside them, which is the bill's;
- every statement carries its number, and FOCUS's InvoiceId is the team statement's number on
  each team row and the fleet's on platform rows;
- summary.csv has currency and period on every row and unit_price x card_hours = list_cost;
- FOCUS has BillingAccountType, SubAccountType, ContractedUnitPrice (ContractedUnitPrice x
  PricingQuantity = ContractedCost) and the cost centre / GL account from `finance.cost_centres`;
- a team with a budget shows "Budget vs actual" on its statement.
"""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from gpuledger.core.window import Window
from gpuledger.reports.monthly import issue_monthly
from gpuledger.reports.statement import statement_number
from gpuledger.warehouse import LoadBatch, Warehouse

PERIOD = "2024-11"
TEAMS = [{"name": f"team{i:02d}", "weight": 1.0 + i % 3} for i in range(13)]
SETTINGS = Settings(
    teams={"budgets": {"team00": 500.0}},
    finance={"cost_centres": {"team01": {"cost_centre": "CC-4711", "gl_account": "6420"}}},
)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec

    folder = tmp_path_factory.mktemp("finance")
    path = folder / "w.duckdb"
    window = Window(datetime(2024, 11, 3, tzinfo=UTC), datetime(2024, 11, 5, tzinfo=UTC), timedelta(minutes=5))
    sim = Simulation(FleetSpec.default(gpus=24, gpus_per_node=4, teams=TEAMS), window, seed=5)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for sub, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=sub))
    with Warehouse.open(path, read_only=True) as wh:
        result = issue_monthly(wh, SETTINGS, PERIOD, folder / "out", now=datetime(2024, 12, 2, tzinfo=UTC))
        bill = compute_bill(wh, Period.exact(PERIOD).window, SETTINGS, by=("team",))
    return {"folder": result.folder, "bill": bill}


def _text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout


def _amount(text: str, label: str) -> float:
    pattern = r"\s+".join(re.escape(word) for word in label.split())  # the line may wrap anywhere
    match = re.search(pattern + r"\s+(-?[\d,]+\.\d\d)", text)
    assert match, f"{label!r} not in the fleet statement"
    return float(match.group(1).replace(",", ""))


def test_fleet_pdf_names_every_team_and_reconciles(report: dict) -> None:
    bill = report["bill"]
    billed = sorted(t for t in bill.lines["team"].to_list() if t not in SPECIAL_LINES)
    assert len(billed) >= 11  # more than the ten rows a table used to show
    text = _text(report["folder"] / "statements" / "fleet.pdf")
    for team in billed:
        assert re.search(rf"\b{team}\b", text), team
    teams_section = text[text.index("Cost by team"):text.index("Team charges")]
    assert not re.search(r"\d+ more\b", teams_section)  # (other tables may still fold rows)
    for team in billed:
        assert team in teams_section
    parts = [_amount(text, label) for label in (
        "Team charges", "+ Sharing discount absorbed by the platform", "+ Unallocated capacity",
        "+ Unattributed usage (no team label)")]
    fleet = _amount(text, "= Fleet cost")
    assert round(sum(parts), 2) == pytest.approx(fleet, abs=0.005)
    assert fleet == pytest.approx(round(bill.fleet_cost, 2), abs=0.005)
    team_lines = bill.lines.filter(~pl.col("team").is_in(list(SPECIAL_LINES)))["cost"].sum()
    assert parts[0] == pytest.approx(round(float(team_lines), 2), abs=0.011)
    assert statement_number("gpu-fleet", PERIOD, None) in text


def test_team_statement_number_budget_and_cost_centre(report: dict) -> None:
    text = _text(report["folder"] / "statements" / "team-team00.pdf")
    assert "gpu-fleet-202411-TEAM00" in text and "budget vs actual" in text.lower()
    assert "CC-4711" in _text(report["folder"] / "statements" / "team-team01.pdf")


def test_summary_csv_finance_columns(report: dict) -> None:
    summary = pl.read_csv(report["folder"] / "summary.csv", schema_overrides={"cost_centre": pl.String,
                                                                             "gl_account": pl.String})
    assert set(summary["currency"]) == {"USD"} and set(summary["period"]) == {PERIOD}
    priced = summary.filter(pl.col("card_hours") > 0)
    assert (priced["unit_price"] * priced["card_hours"] - priced["list_cost"]).abs().max() < 1e-3
    centre = summary.filter(pl.col("team") == "team01")
    assert set(centre["cost_centre"]) == {"CC-4711"} and set(centre["gl_account"]) == {"6420"}
    other = summary.filter(pl.col("team") == "team02")
    assert other.height and other["cost_centre"].null_count() == other.height


def test_focus_finance_columns(report: dict) -> None:
    focus = pl.read_parquet(report["folder"] / "focus.parquet")
    for column in ("BillingAccountType", "SubAccountType", "ContractedUnitPrice", "InvoiceId",
                   "ListUnitPrice", "x_CostCenter", "x_GlAccount"):
        assert column in focus.columns, column
    teams = focus.filter(~pl.col("SubAccountId").is_in(list(SPECIAL_LINES)))
    expected = teams["SubAccountId"].map_elements(lambda t: statement_number("gpu-fleet", PERIOD, t), pl.String)
    assert (teams["InvoiceId"] == expected).all()
    platform = focus.filter(pl.col("SubAccountId").is_in(list(SPECIAL_LINES)))
    assert set(platform["InvoiceId"]) == {"gpu-fleet-202411-FLEET"}
    assert set(platform["SubAccountType"]) == {"Platform"} and set(teams["SubAccountType"]) == {"Team"}
    priced = focus.filter(pl.col("ContractedUnitPrice").is_not_null()).select(
        pl.col("ContractedUnitPrice", "PricingQuantity", "ContractedCost").cast(pl.Float64))
    assert priced.height > 0
    gap = (priced["ContractedUnitPrice"] * priced["PricingQuantity"] - priced["ContractedCost"]).abs().max()
    assert gap < 1e-6
    assert set(focus.filter(pl.col("SubAccountId") == "team01")["x_CostCenter"]) == {"CC-4711"}
    assert focus.filter(pl.col("SubAccountId") == "team02")["x_CostCenter"].null_count() > 0
