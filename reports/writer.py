"""Write a report's files into a folder (the caller seals it with the manifest).

```
summary.csv              team x model x sharing-mode lines + special lines + adjustments,
                         with currency, unit price and the team's cost centre / GL account
focus.parquet FinOps FOCUS export (focus.csv too with reports.focus_formats)
statements.pdf           every statement: fleet first (every team, more pages when needed),
                         then one page per team
statements/fleet.html|pdf, statements/team-<name>.html|pdf
```
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.core.config import Settings
from gpuledger.core.money import fixed_columns
from gpuledger.core.rules_record import RecordedRules
from gpuledger.reports.compose import MonthlyData, build_statements
from gpuledger.reports.focus import focus_frame, write_focus
from gpuledger.reports.html import render_statement
from gpuledger.reports.pdf import write_statements
from gpuledger.reports.statement import LIMITS

SUMMARY_FLOAT_DECIMALS = 6
SUMMARY_MONEY = ("list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost", "cost",
                 "idle_cost")
"""summary.csv's money columns, written at the currency's decimals (`core.money.fixed`)."""


def report_totals(data: MonthlyData) -> dict[str, Any]:
    """Headline numbers recorded in the manifest and the warehouse."""
    summary = data.summary
    own = summary.filter(pl.col("line") != "adjustment")

    def total(frame: pl.DataFrame, column: str = "cost") -> float:
        return round(float(frame[column].sum() or 0.0), 6) if frame.height else 0.0

    return {
        "currency": data.bill.currency,
        "fleet_cost": round(data.bill.fleet_cost, 6),
        "fleet_card_hours": total(own, "card_hours"),
        "lines_cost": total(own),
        "adjustments_cost": total(summary.filter(pl.col("line") == "adjustment")),
        "total_cost": total(summary),
        "idle_cost": total(own, "idle_cost"),
        "unallocated_cost": total(own.filter(pl.col("line") == SpecialLine.UNALLOCATED)),
        "unattributed_cost": total(own.filter(pl.col("line") == SpecialLine.UNATTRIBUTED)),
        "sharing_discount": total(own.filter(pl.col("line") == SpecialLine.SHARING_DISCOUNT)),
        "teams": data.teams(),
        "summary_rows": summary.height,
    }


def summary_csv(
    summary: pl.DataFrame, currency: str, settings: Settings, rules: RecordedRules | None = None,
) -> pl.DataFrame:
    """summary.csv: the summary lines plus `currency`, the `unit_price` behind each line's list
    cost (unit_price x card_hours = list_cost), the team's cost centre / GL account
    (`finance.cost_centres`) and `rules`, the fingerprint of the rules the report's numbers were
    computed under (empty: not recorded; docs/decisions/0150). Only the file gains columns; the
    warehouse's `report_lines` keep the summary schema."""
    centres = settings.finance.cost_centres
    mapping = {t: c.cost_centre for t, c in centres.items()}
    accounts = {t: c.gl_account for t, c in centres.items() if c.gl_account}
    price = pl.when(pl.col("card_hours") != 0).then(pl.col("list_cost") / pl.col("card_hours"))
    return summary.with_columns(
        pl.lit(currency).alias("currency"),
        price.alias("unit_price"),
        pl.col("team").replace_strict(mapping, default=None, return_dtype=pl.String).alias("cost_centre"),
        pl.col("team").replace_strict(accounts, default=None, return_dtype=pl.String).alias("gl_account"),
        pl.lit(rules.fingerprint if rules is not None else None, pl.String).alias("rules"),
    )


def write_report(
    folder: Path, data: MonthlyData, settings: Settings, *, status: str, generated_at: datetime,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """Write every file of the report into `folder`; return the totals (with page counts)."""
    folder.mkdir(parents=True, exist_ok=True)
    # 1. The lines, exactly as billed (sub-cent precision; statements round to cents).
    # Money at the currency's decimals (the lines are whole cents already; issue 32); GPU-hours
    # and the unit price (list cost / GPU-hours, so unit_price x card_hours = list_cost) to
    # SUMMARY_FLOAT_DECIMALS.
    summary = summary_csv(data.summary, data.bill.currency, settings, data.rules)
    fixed_columns(summary, SUMMARY_MONEY, data.bill.currency).write_csv(
        folder / "summary.csv", float_precision=SUMMARY_FLOAT_DECIMALS, float_scientific=False
    )
    # 2. The FOCUS export.
    focus = focus_frame(data.bill.detail, data.summary, data.bill.window, settings, data.bill.currency,
                        rules=data.bill.raw.rules)
    write_focus(focus, folder, settings.reports.focus_formats)
    # 3. Statements: HTML beside PDF, and one combined PDF.
    statements_dir = folder / "statements"
    statements_dir.mkdir(exist_ok=True)
    candidates = {statement.key: [render_statement(statement, limits) for limits in LIMITS]
                  for statement in build_statements(data, settings, status, generated_at, notes)}
    kept, pages = write_statements(
        [(statements_dir / f"{key}.pdf", htmls) for key, htmls in candidates.items()],
        folder / "statements.pdf", settings.reports.paper, settings.reports.pdf_processes)
    for (key, htmls), index in zip(candidates.items(), kept, strict=True):
        (statements_dir / f"{key}.html").write_text(htmls[index])
    totals = report_totals(data)
    totals["focus_rows"] = focus.height
    totals["pdf_pages"] = {p.relative_to(folder).as_posix(): n for p, n in sorted(pages.items())}
    return totals
