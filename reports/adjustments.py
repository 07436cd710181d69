"""Late data: usage of a finalized month that arrived after it was issued.

A finalized issue never changes. When data for an issued month Q arrives later, the next
report (period P > Q) carries `adjustment` lines for Q: the difference between Q's bill as
computed now and what has already been billed for Q.

What has been billed for Q:
1. the lines of Q's latest finalized version (its own lines, not the adjustments it carried);
2. plus the adjustment lines for Q carried by the latest finalized version of every period
   strictly between Q and P (adjustments already billed in later months).
So a month is never billed twice: once an adjustment is finalized, the next report measures
against it; a reissue of Q that already includes the late data turns earlier adjustments into
a credit. Only issued months within `reports.adjustment_lookback_months` are re-billed.
"""

from __future__ import annotations

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from gpuledger.reports.billing import AMOUNTS, SUMMARY_BY, empty_summary, month_bill, summary_lines
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.reports import (
    carried_adjustments,
    issued_own_lines,
    latest_issue_versions,
)

MONEY_EPSILON = 0.005
HOURS_EPSILON = 0.001


def billed_for(wh: Warehouse, month: str, before: str) -> pl.DataFrame:
    """What has been billed for `month` by finalized issues of periods before `before`."""
    latest = latest_issue_versions(wh)
    if month not in latest:
        return empty_summary()
    first, last = Period.exact(month), Period.exact(before)
    carriers = [(p, v) for p, v in latest.items() if first < Period.exact(p) < last]
    frames = [issued_own_lines(wh, month, latest[month])]
    frames += [carried_adjustments(wh, period, version, month) for period, version in carriers]
    return pl.concat([f.select(empty_summary().columns) for f in frames], how="vertical_relaxed")


def _totals(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.group_by(list(SUMMARY_BY)).agg(pl.col(n).sum() for n in AMOUNTS)


def unbilled(current: pl.DataFrame, billed: pl.DataFrame) -> pl.DataFrame:
    """Material differences `current - billed` per team x model x sharing mode."""
    joined = _totals(current).join(
        _totals(billed), on=list(SUMMARY_BY), how="full", coalesce=True, suffix="_b", nulls_equal=True
    )
    delta = joined.select(
        *SUMMARY_BY,
        *((pl.col(n).fill_null(0.0) - pl.col(f"{n}_b").fill_null(0.0)).alias(n) for n in AMOUNTS),
    )
    material = pl.any_horizontal(
        *(pl.col(n).abs() >= (HOURS_EPSILON if n.endswith("hours") else MONEY_EPSILON) for n in AMOUNTS)
    )
    return delta.filter(material).sort(list(SUMMARY_BY), nulls_last=True)


def adjustments_for(
    wh: Warehouse, settings: Settings, period: str, lookback: int | None = None, *, as_computed: bool = False,
) -> pl.DataFrame:
    """Adjustment lines (summary schema) that the report of `period` must carry (`as_computed`:
    the issued months billed again as their roll-up was computed, as the report itself is)."""
    months = settings.reports.adjustment_lookback_months if lookback is None else lookback
    reported = Period.exact(period)
    earliest = reported.shift(-months)
    issued = sorted(p for p in latest_issue_versions(wh) if earliest <= Period.exact(p) < reported)
    out = [empty_summary()]
    for month in issued:
        current = summary_lines(month_bill(wh, settings, month, as_computed=as_computed))
        rows = unbilled(current, billed_for(wh, month, period))
        if rows.height:
            out.append(
                rows.select(
                    pl.lit(period).alias("period"),
                    pl.lit("adjustment").alias("line"),
                    pl.lit(month).alias("for_period"),
                    *SUMMARY_BY,
                    *AMOUNTS,
                )
            )
    return pl.concat(out, how="vertical_relaxed")
