"""All teams at once: one row per team with what it spends, wastes and could save.

The question the Teams page, its CSV and the API answer ("which team spends and wastes
most?"). Built only from things already computed and reconciled elsewhere, so nothing here
can drift from the bill:
- cost, card-hours, idle cost: the team's line of the bill by team (`analytics.billing.bill`);
- change vs last month: the same line of the previous month's bill;
- mean GPU activity: the bill's detail rows of held devices, activity weighted by card-hours
  (hours without an activity reading left out, as the bill leaves them out of idle);
- budget used and the month-end forecast: `analytics.billing.budgets`;
- potential saving per month: the sum of the team's recommendations (`analytics.workloads.recommend`,
  at most one per workload and kind, so nothing is counted twice).
The special lines (unattributed, unallocated, sharing_discount) follow the teams, and the
rows' costs sum to the fleet cost to the cent.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.billing.bill import Bill
from gpuledger.analytics.billing.budgets import budget_status
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.config import Settings

SCHEMA: dict[str, type[pl.DataType]] = {
    "team": pl.String, "special": pl.Boolean, "cost": pl.Float64, "previous_cost": pl.Float64,
    "change": pl.Float64, "card_hours": pl.Float64, "idle_cost": pl.Float64,
    "idle_share": pl.Float64, "activity": pl.Float64, "budget": pl.Float64,
    "budget_used": pl.Float64, "forecast": pl.Float64, "saving": pl.Float64,
}


def _line_totals(bill: Bill) -> pl.DataFrame:
    return bill.lines.group_by("team").agg(
        pl.col("cost").sum(), pl.col("card_hours").sum(), pl.col("idle_cost").sum()
    )


def mean_activity(bill: Bill) -> dict[str, float]:
    """Per team: card-hour-weighted mean activity of the devices it held."""
    held = bill.allocated().filter(pl.col("active_ratio").is_not_null()).collect()
    if held.is_empty():
        return {}
    grouped = held.group_by("team").agg(
        ((pl.col("active_ratio") * pl.col("card_hours")).sum() / pl.col("card_hours").sum()).alias("a")
    )
    return {str(t): float(a) for t, a in grouped.iter_rows() if a is not None}


def savings_by_team(recommendations: pl.DataFrame) -> dict[str, float]:
    if recommendations.is_empty():
        return {}
    grouped = recommendations.group_by("team").agg(pl.col("monthly_saving").sum())
    return {str(t): float(s) for t, s in grouped.iter_rows()}


def teams_overview(
    bill: Bill, settings: Settings, *, previous: Bill | None = None,
    recommendations: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per team (by cost, highest first), then the special lines; see module docstring."""
    now = _line_totals(bill)
    before = {str(t): float(c) for t, c, *_ in _line_totals(previous).iter_rows()} if previous else {}
    activity = mean_activity(bill)
    saving = savings_by_team(recommendations if recommendations is not None else pl.DataFrame())
    budgets = {r["team"]: r for r in budget_status(bill, settings).iter_rows(named=True)}
    rows = []
    for team, cost, card_hours, idle_cost in now.iter_rows():
        special = team in SPECIAL_LINES
        prev = before.get(team) if previous is not None else None
        b = budgets.get(team, {}) if not special else {}
        rows.append({
            "team": team, "special": special, "cost": round(cost, 2), "previous_cost": prev,
            "change": (cost - prev) / abs(prev) if prev else None, "card_hours": card_hours,
            "idle_cost": round(idle_cost, 2), "idle_share": idle_cost / cost if cost else None,
            "activity": activity.get(team), "budget": b.get("budget"),
            "budget_used": b.get("used_ratio"), "forecast": b.get("forecast"),
            # a special line's saving when it has recommendations (unattributed workloads do):
            # the rows' savings sum to the recommendations' total, the figure on every surface
            "saving": saving.get(team, None if special else 0.0),
        })
    frame = pl.DataFrame(rows, schema=SCHEMA)
    order = {name: i for i, name in enumerate(SPECIAL_LINES)}
    return frame.with_columns(
        pl.col("team").replace_strict(order, default=-1, return_dtype=pl.Int64).alias("_o")
    ).sort(["_o", "cost", "team"], descending=[False, True, False]).drop("_o")


def waste_headline(bill: Bill) -> dict[str, float]:
    """Unallocated cost + teams' idle cost, and their share of the fleet cost (Fleet's headline)."""
    lines = bill.lines
    spare = lines.filter(pl.col("team") == "unallocated")
    moved = spare["redistributed_cost"] if "redistributed_cost" in spare.columns else 0.0
    unallocated = float((spare["cost"] - moved).sum())  # before any redistribution
    idle = float(lines.filter(pl.col("team") != "unallocated")["idle_cost"].sum())
    waste = unallocated + idle
    return {"unallocated": unallocated, "idle": idle, "waste": waste,
            "share": waste / bill.fleet_cost if bill.fleet_cost else 0.0}
