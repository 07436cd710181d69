"""The one place reports call analytics: the month's bill, as summary lines and detail rows.

Reports never price anything themselves; they re-shape `analytics.billing.bill.compute_bill`, so a
report always equals `gpuledger bill` for the same period to the cent. The summary grain is
team x GPU model x sharing mode; the special teams (`unallocated`, `unattributed`,
`sharing_discount`) become their own line types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.period import Period
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

SUMMARY_BY = ("team", "model", "sharing_mode")
AMOUNTS = (
    "card_hours", "list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost",
    "cost", "idle_card_hours", "idle_cost",
)
"""Per line: cost = list_cost - sharing_discount + utilization_adjustment + redistributed_cost
(money in whole cents, as `analytics.billing.bill` rounds it). On the `sharing_discount` line the
discount column is the negated total, so every money column sums to its fleet total."""
SUMMARY_SCHEMA: dict[str, Any] = {
    "period": pl.String,
    "line": pl.String,
    "for_period": pl.String,
    "team": pl.String,
    "model": pl.String,
    "sharing_mode": pl.String,
    **{name: pl.Float64 for name in AMOUNTS},
}
"""Columns of summary.csv and of the warehouse's `report_lines` (plus period/version there).
`line` is `team`, one of `analytics.billing.special_lines.SPECIAL_LINES` or `adjustment`; `for_period`
is the month the numbers belong to (the report's own period, or an earlier one for an
adjustment)."""


@dataclass(frozen=True)
class MonthBill:
    """What a report needs from analytics for one month."""

    period: str
    window: Window
    currency: str
    fleet_cost: float
    fleet_card_hours: float
    lines: pl.DataFrame
    detail: pl.DataFrame
    raw: Any
    """The `analytics.billing.bill.Bill` itself (for analytics functions that take one)."""


def month_bill(wh: Warehouse, settings: Settings, period: str, *, as_computed: bool = False) -> MonthBill:
    """The bill of `period` (YYYY-MM) at team x model x sharing-mode grain (`as_computed`: the
    roll-up under the rules it was stored under, `compute_bill`)."""
    from gpuledger.analytics.billing.bill import compute_bill

    window = Period.exact(period).window
    bill = compute_bill(wh, window, settings, by=SUMMARY_BY, as_computed=as_computed)
    return MonthBill(
        period=period,
        window=window,
        currency=str(bill.currency),
        fleet_cost=float(bill.fleet_cost),
        fleet_card_hours=float(bill.fleet_card_hours),
        lines=bill.lines,
        detail=bill.detail,
        raw=bill,
    )


def has_usage(bill: MonthBill) -> bool:
    """True when the month has any card-hours at all (an empty month is not billed)."""
    if bill.detail.height == 0:
        return False
    return float(bill.detail["card_hours"].sum() or 0.0) > 0


def require_usage(bill: MonthBill, wh_path: str) -> None:
    if not has_usage(bill):
        raise ReportError(
            f"period {bill.period}: warehouse {wh_path} has no GPU usage between "
            f"{bill.window.start.date()} and {bill.window.end.date()} (end exclusive); "
            "nothing to bill: collect that month first (`gpuledger collect`) or pick another period"
        )


def summary_lines(bill: MonthBill) -> pl.DataFrame:
    """Bill lines as summary rows (SUMMARY_SCHEMA), special lines last, stable order."""
    lines = bill.lines
    for name in AMOUNTS:
        if name not in lines.columns:
            lines = lines.with_columns(pl.lit(0.0).alias(name))
    for name in SUMMARY_BY:
        if name not in lines.columns:
            lines = lines.with_columns(pl.lit(None, pl.String).alias(name))
    line_type = (
        pl.when(pl.col("team").is_in(list(SPECIAL_LINES))).then(pl.col("team")).otherwise(pl.lit("team"))
    )
    out = lines.select(
        pl.lit(bill.period).alias("period"),
        line_type.alias("line"),
        pl.lit(bill.period).alias("for_period"),
        *(pl.col(n).cast(pl.String) for n in SUMMARY_BY),
        *(pl.col(n).cast(pl.Float64).fill_null(0.0) for n in AMOUNTS),
    )
    order = {name: i for i, name in enumerate(("team", *SPECIAL_LINES, "adjustment"))}
    return (
        out.with_columns(pl.col("line").replace_strict(order, default=99).alias("_o"))
        .sort(["_o", "team", "model", "sharing_mode"], nulls_last=True)
        .drop("_o")
    )


def empty_summary() -> pl.DataFrame:
    return pl.DataFrame(schema=SUMMARY_SCHEMA)
