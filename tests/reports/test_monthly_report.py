"""The monthly report of a simulated month: numbers, FOCUS export, statements, manifest.

Cases:
- summary.csv equals the bill (`compute_bill` / `gpuledger bill --format json`) line by line to
  the cent; its rows sum to the fleet cost, which is hand-computed from the fleet (10 cards x
  720 h x unit price) — an independent check of the whole chain
- per-team totals equal a bill grouped by team only (an independent grouping)
- focus.parquet: every FOCUS 1.2 mandatory column and the 1.3 columns present with the FOCUS
  type (Decimal amounts, UTC timestamps, strings); only FOCUS or `x_` columns; the mapping
  rules (categories, units, SkuId shape, ResourceId, SubAccountId, ListCost = unit price x
  quantity, end-exclusive daily charge periods inside the billing period, split-allocation
  ratios summing to 1 per card-day, AllocatedResourceId null exactly on unallocated rows, JSON
  columns are objects); BilledCost sums to the fleet cost; team sums equal the summary
- focus.csv: same rows, ISO-8601 UTC times with `Z`, plain decimal numbers (no exponent)
- statements.pdf opens (poppler) with the fleet statement (at most 2 pages, with its Fleet advice
  section), then one page per team; each team statement PDF is one page and names its team; page 1 renders to PNG; HTML beside each PDF
- manifest.json: period, status, code and price-book versions, the sha256 of every file; the
  inputs hash is the same for a second run over the same data and changes with the prices
- an empty month is a clear `ReportError` (CLI: exit 1, one line), and writes nothing
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from gpuledger import __version__
from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.cli import main
from gpuledger.core.config import PriceEntry, ReportSettings, Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.period import Period
from gpuledger.reports.billing import empty_summary, month_bill
from gpuledger.reports.compose import inputs_sha256
from gpuledger.reports.manifest import sha256_file
from gpuledger.reports.monthly import issue_monthly
from gpuledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

PERIOD = "2024-11"
NOW = datetime(2024, 12, 2, tzinfo=UTC)
# Hand-computed: 2 cards per pool, 720 hours in November, default price book.
#   h100-train + h100-vgpu: 4 x 3.00, a100-mig: 2 x 1.90, a100-ts: 2 x 1.30, h200: 2 x 3.80
FLEET_COST = 720 * (4 * 3.00 + 2 * 1.90 + 2 * 1.30 + 2 * 3.80)
FLEET_CARD_HOURS = 10 * 720
FOCUS_MANDATORY = {
    "BilledCost": "decimal", "BillingAccountId": "string", "BillingAccountName": "string",
    "BillingCurrency": "string", "BillingPeriodEnd": "timestamp", "BillingPeriodStart": "timestamp",
    "ChargeCategory": "string", "ChargeClass": "string", "ChargeDescription": "string",
    "ChargePeriodEnd": "timestamp", "ChargePeriodStart": "timestamp", "ContractedCost": "decimal",
    "EffectiveCost": "decimal", "InvoiceIssuerName": "string", "ListCost": "decimal",
    "PricingQuantity": "decimal", "PricingUnit": "string", "ProviderName": "string",
    "PublisherName": "string", "ServiceCategory": "string", "ServiceName": "string",
    # FOCUS 1.3
    "ServiceProviderName": "string", "HostProviderName": "string", "AllocatedMethodId": "string",
    "AllocatedMethodDetails": "string", "AllocatedResourceId": "string",
    "AllocatedResourceName": "string", "AllocatedTags": "string",
}
FOCUS_OTHER = {
    "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit", "ListUnitPrice", "PricingCategory",
    "ResourceId", "ResourceName", "ResourceType", "ServiceSubcategory", "SkuId", "SkuPriceId",
    "SubAccountId", "SubAccountName", "Tags",
    "BillingAccountType", "SubAccountType", "ContractedUnitPrice", "InvoiceId",
    "SkuMeter", "SkuPriceDetails", "CommitmentDiscountStatus",  # focus-validator (docs/decisions/0193)
}
CENT = 0.005


@pytest.fixture(scope="module")
def report(base_warehouse, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-out")
    with Warehouse.open(base_warehouse, read_only=True) as wh:
        # CSV on request (reports.focus_formats; Parquet alone by default) so both files are checked
        csv_too = Settings(reports=ReportSettings(focus_formats=("parquet", "csv")))
        result = issue_monthly(wh, csv_too, PERIOD, out, now=NOW)
        bill = compute_bill(wh, Period.exact(PERIOD).window, Settings(), by=("team", "model", "sharing_mode"))
        by_team = compute_bill(wh, Period.exact(PERIOD).window, Settings(), by=("team",))
    return {"result": result, "folder": result.folder, "bill": bill, "by_team": by_team,
            "warehouse": base_warehouse}


def _summary(folder: Path) -> pl.DataFrame:
    return pl.read_csv(folder / "summary.csv", schema_overrides={"model": pl.String, "sharing_mode": pl.String})


def test_summary_equals_the_bill_to_the_cent(report):
    summary = _summary(report["folder"])
    bill = report["bill"].to_dict()
    assert bill["fleet_cost"] == pytest.approx(FLEET_COST, abs=CENT)
    assert summary.filter(pl.col("line") != "adjustment")["card_hours"].sum() == pytest.approx(FLEET_CARD_HOURS)
    assert summary["cost"].sum() == pytest.approx(FLEET_COST, abs=CENT)
    assert summary.height == len(bill["lines"])
    rows = {(r["team"], r["model"], r["sharing_mode"]): r for r in summary.iter_rows(named=True)}
    for line in bill["lines"]:
        row = rows[(line["team"], line["model"], line["sharing_mode"])]
        for column in ("list_cost", "sharing_discount", "cost", "idle_cost", "redistributed_cost"):
            assert row[column] == pytest.approx(line[column], abs=CENT), (line, column)
        assert row["card_hours"] == pytest.approx(line["card_hours"], abs=1e-6)
        assert row["idle_card_hours"] == pytest.approx(line["idle_card_hours"], abs=1e-6)
        expected_line = line["team"] if line["team"] in ("unallocated", "unattributed", "sharing_discount") else "team"
        assert row["line"] == expected_line
    assert set(summary["line"]) == {"team", "unallocated", "unattributed", "sharing_discount"}
    # An independent grouping: the bill by team only.
    per_team = summary.group_by("team").agg(pl.col("cost").sum())
    for line in report["by_team"].to_dict()["lines"]:
        got = per_team.filter(pl.col("team") == line["team"])["cost"].item()
        assert got == pytest.approx(line["cost"], abs=0.011), line["team"]


def test_summary_equals_the_bill_cli_json(report):
    """Through the command line, as finance would compare them."""
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(report["warehouse"]), "bill",
         "--period", PERIOD, "--by", "team,model,sharing_mode", "--format", "json"],
        capture_output=True, text=True, check=True, cwd=report["folder"],
    )
    printed = json.loads(done.stdout)
    summary = _summary(report["folder"])
    assert summary["cost"].sum() == pytest.approx(printed["fleet_cost"], abs=CENT)
    rows = {(r["team"], r["model"], r["sharing_mode"]): r["cost"] for r in summary.iter_rows(named=True)}
    assert len(rows) == len(printed["lines"])
    for line in printed["lines"]:
        assert rows[(line["team"], line.get("model"), line.get("sharing_mode"))] == pytest.approx(line["cost"], abs=CENT)


def test_focus_parquet_columns_types_and_rules(report):
    table = pq.read_table(report["folder"] / "focus.parquet")
    schema = {f.name: str(f.type) for f in table.schema}
    for name, kind in FOCUS_MANDATORY.items():
        assert name in schema, f"FOCUS column {name} missing"
        if kind == "decimal":
            assert schema[name].startswith("decimal128("), (name, schema[name])
        elif kind == "timestamp":
            assert schema[name] in ("timestamp[us, tz=UTC]", "timestamp[ns, tz=UTC]"), (name, schema[name])
        else:
            assert schema[name] in ("string", "large_string"), (name, schema[name])
    unknown = [c for c in schema if c not in FOCUS_MANDATORY and c not in FOCUS_OTHER and not c.startswith("x_")]
    assert unknown == []
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    money = frame.with_columns(pl.col(c).cast(pl.Float64) for c in (
        "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "PricingQuantity", "ListUnitPrice"))
    # Totals: BilledCost over every row is the fleet cost; per team it is the summary's.
    assert money["BilledCost"].sum() == pytest.approx(FLEET_COST, abs=0.01)
    summary = _summary(report["folder"]).group_by("team").agg(pl.col("cost").sum())
    focus_teams = money.group_by("SubAccountId").agg(pl.col("BilledCost").sum())
    assert set(focus_teams["SubAccountId"]) == set(summary["team"])
    for team, cost in summary.iter_rows():
        got = focus_teams.filter(pl.col("SubAccountId") == team)["BilledCost"].item()
        assert got == pytest.approx(cost, abs=0.011), team
    # Constant columns and billing period (end-exclusive month, UTC).
    start, end = datetime(2024, 11, 1, tzinfo=UTC), datetime(2024, 12, 1, tzinfo=UTC)
    assert set(frame["BillingPeriodStart"]) == {start} and set(frame["BillingPeriodEnd"]) == {end}
    assert set(frame["BillingCurrency"]) == {"USD"}
    assert set(frame["ServiceCategory"]) == {"AI and Machine Learning"}
    assert set(frame["ServiceName"]) == {"GPU Pool"}
    assert set(frame["ChargeCategory"]) <= {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
    assert frame.null_count().select(
        "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ChargeCategory",
        "BillingAccountId", "ServiceProviderName", "HostProviderName").sum_horizontal().item() == 0
    assert (frame["ChargePeriodStart"] >= start).all() and (frame["ChargePeriodEnd"] <= end).all()
    # Usage rows: the mapping of the issue.
    usage = money.filter(pl.col("ChargeCategory") == "Usage")
    assert usage["ChargeClass"].null_count() == usage.height
    assert ((usage["ChargePeriodEnd"] - usage["ChargePeriodStart"]) == timedelta(days=1)).all()
    assert set(usage["PricingUnit"]) == {"GPU-Hours"} and set(usage["ConsumedUnit"]) == {"GPU-Hours"}
    assert usage["PricingQuantity"].null_count() == 0 and usage["SkuPriceId"].null_count() == 0
    sku = re.compile(r"^[A-Za-z0-9-]+:(whole|\d+g\.\d+gb(\+me)?|timeslice/\d+|vgpu)$")
    assert all(sku.match(s) for s in usage["SkuId"]), usage["SkuId"].unique().to_list()
    assert {s.split(":")[1].split("/")[0] for s in usage["SkuId"]} >= {"whole", "timeslice", "vgpu", "3g.40gb"}
    assert all(r.startswith("GPU-") for r in usage["ResourceId"])
    mig = usage.filter(pl.col("x_SharingMode") == "mig", pl.col("SubAccountId") != "unallocated")
    assert mig.height and all(re.search(r"/gi\d+$", r) for r in mig["ResourceId"])
    listed = usage.filter(pl.col("PricingQuantity") > 0)
    gap = (listed["ListCost"] - listed["ListUnitPrice"] * listed["PricingQuantity"]).abs()
    assert (gap < 1e-6).all()
    assert (usage["EffectiveCost"] <= usage["ListCost"] + 1e-9).all()
    assert (usage["BilledCost"] == usage["EffectiveCost"]).all()
    teams = usage.filter(~pl.col("SubAccountId").is_in(["unallocated"]))
    assert teams["AllocatedResourceId"].null_count() == 0
    assert usage.filter(pl.col("SubAccountId") == "unallocated")["AllocatedResourceId"].null_count() == \
        usage.filter(pl.col("SubAccountId") == "unallocated").height
    assert all(a == f"{ns}/{pod}" for a, ns, pod in teams.select("AllocatedResourceId", "x_Namespace", "x_Pod").iter_rows())
    # Split allocation: the ratios of one card-day's rows add up to 1.
    ratios = usage.with_columns(
        pl.col("AllocatedMethodDetails").map_elements(
            lambda s: json.loads(s)["Elements"][0]["AllocatedRatio"], return_dtype=pl.Float64).alias("r"),
        pl.col("ResourceId").str.replace(r"/gi\d+$", "").alias("card"),
    ).group_by("card", "ChargePeriodStart").agg(pl.col("r").sum())
    assert ratios["r"].min() == pytest.approx(1.0, abs=1e-9) and ratios["r"].max() == pytest.approx(1.0, abs=1e-9)
    for column in ("AllocatedMethodDetails", "AllocatedTags", "Tags"):
        for value in frame[column].drop_nulls().unique().to_list()[:200]:
            assert isinstance(json.loads(value), dict)
    # The discount the platform absorbs: Adjustment rows on the sharing_discount sub-account.
    absorbed = money.filter(pl.col("ChargeCategory") == "Adjustment")
    assert set(absorbed["SubAccountId"]) == {"sharing_discount"}
    bill_discount = next(li for li in report["bill"].to_dict()["lines"] if li["team"] == "sharing_discount")["cost"]
    assert absorbed["BilledCost"].sum() == pytest.approx(bill_discount, abs=0.01)


def test_focus_csv_is_iso_utc_and_plain_decimals(report):
    with (report["folder"] / "focus.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == pq.read_metadata(report["folder"] / "focus.parquet").num_rows
    stamp = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
    number = re.compile(r"^-?\d+(\.\d+)?$")
    for row in rows[:500]:
        for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
            assert stamp.match(row[column]), (column, row[column])
        for column in ("BilledCost", "ListCost", "EffectiveCost", "ContractedCost"):
            assert number.match(row[column]), (column, row[column])
    total = sum(Decimal(r["BilledCost"]) for r in rows)
    assert float(total) == pytest.approx(FLEET_COST, abs=0.01)


def _pdf_pages(path: Path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^Pages:\s+(\d+)", info, re.M)
    assert match, info
    return int(match.group(1))


def _page_text(path: Path, page: int) -> str:
    return subprocess.run(
        ["pdftotext", "-f", str(page), "-l", str(page), "-layout", str(path), "-"],
        capture_output=True, text=True, check=True,
    ).stdout


def test_statements_one_page_each(report, tmp_path):
    folder = report["folder"]
    teams = report["result"].totals["teams"]
    assert teams == ["nlp", "speech", "vision"]
    combined = folder / "statements.pdf"
    # The fleet statement may take more than a page (every team, the Fleet advice section);
    # each team statement is one page.
    fleet_pages = _pdf_pages(folder / "statements" / "fleet.pdf")
    assert fleet_pages <= 2
    assert _pdf_pages(combined) == fleet_pages + len(teams)
    assert "GPU fleet" in _page_text(combined, 1) and "18,720.00" in _page_text(combined, 1)
    summary = _summary(folder)
    for page, team in enumerate(teams, start=fleet_pages + 1):
        text = _page_text(combined, page)
        assert f"Team {team}" in text
        due = summary.filter(pl.col("team") == team)["cost"].sum()
        assert f"{due:,.2f}" in text
        single = folder / "statements" / f"team-{team}.pdf"
        assert _pdf_pages(single) == 1 and f"Team {team}" in _page_text(single, 1)
        html = (folder / "statements" / f"team-{team}.html").read_text()
        assert "<svg" in html and "Top idle workloads" in html and "Recommendations" in html
    subprocess.run(["pdftoppm", "-r", "40", "-png", "-f", "1", "-l", "1", str(combined), str(tmp_path / "p")],
                   check=True)
    png = next(tmp_path.glob("p*.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_manifest_describes_the_folder(report):
    folder = report["folder"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["period"] == PERIOD and manifest["status"] == "draft" and manifest["version"] is None
    assert manifest["generated_at"] == "2024-12-02T00:00:00Z"
    assert manifest["code_version"]["gpuledger"] == __version__
    assert manifest["price_book_version"] == Settings().price_book_version()
    assert manifest["totals"]["fleet_cost"] == pytest.approx(FLEET_COST, abs=CENT)
    files = {f["path"]: f for f in manifest["files"]}
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(files) == on_disk
    assert {"summary.csv", "focus.csv", "focus.parquet", "statements.pdf", "statements/fleet.pdf"} <= set(files)
    for path, entry in files.items():
        assert entry["sha256"] == sha256_file(folder / path)
    # Same data, same inputs hash; other prices, another hash.
    dearer = Settings(price_book=(*Settings().price_book[:1], PriceEntry(model="H100-80GB", unit_price=3.5),
                                  *Settings().price_book[2:]))
    with Warehouse.open(report["warehouse"], read_only=True) as wh:
        again = month_bill(wh, Settings(), PERIOD)
        changed = month_bill(wh, dearer, PERIOD)
    assert inputs_sha256(Settings(), again, empty_summary()) == manifest["inputs_sha256"]
    assert inputs_sha256(dearer, changed, empty_summary()) != manifest["inputs_sha256"]
    assert changed.fleet_cost == pytest.approx(FLEET_COST + 4 * 720 * 0.5, abs=CENT)


def test_empty_month_is_a_clear_error(base_warehouse, tmp_path, capsys):
    with Warehouse.open(base_warehouse, read_only=True) as wh, pytest.raises(ReportError) as caught:
        issue_monthly(wh, Settings(), "2024-09", tmp_path, now=NOW)
    message = str(caught.value)
    assert "2024-09" in message and "no GPU usage" in message and "2024-10-01" in message
    code = main(["--warehouse", str(base_warehouse), "report", "monthly", "--period", "2024-09",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "no GPU usage" in err
    assert not (tmp_path / "period=2024-09" / "draft").exists()
