"""Budgets that act: used, left, the month-end forecast at the current pace, thresholds crossed.

Amounts come from `teams.budgets` (per team per month); thresholds from
`finance.budget_thresholds` (default 80 % and 100 %), per team from `finance.team_thresholds`.

The forecast is the simplest pace that a finance reader can check by hand: cost so far divided
by the hours the data covers, times the month's hours (`as_of` is the bill's newest sample,
so a month half collected forecasts from its first half, never from a collector outage's zero).
A month that is over forecasts exactly its cost. `budget_status()` is what the CLI (`gpuledger
budgets`), the team page's budget tile and the metrics endpoint (`gpuledger_budget_used_ratio`)
all read, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import polars as pl

from gpuledger.analytics.billing.bill import Bill
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.window import Window

STATUS_SCHEMA: dict[str, type[pl.DataType]] = {
    "team": pl.String, "budget": pl.Float64, "used": pl.Float64, "left": pl.Float64,
    "used_ratio": pl.Float64, "forecast": pl.Float64, "forecast_ratio": pl.Float64,
    "threshold": pl.Float64, "forecast_threshold": pl.Float64, "state": pl.String,
}
"""`threshold`: the highest threshold `used_ratio` has crossed (null: none);
`forecast_threshold` the same for the forecast; `state`: ok, warning (a threshold below 1
crossed), over (100 % or more crossed), no_budget."""


def elapsed_fraction(window: Window, as_of: datetime | None) -> float:
    """Share of `window` the data covers (1 when `as_of` is unknown or past the end)."""
    if as_of is None or as_of >= window.end:
        return 1.0
    if as_of <= window.start:
        return 0.0
    return (as_of - window.start).total_seconds() / (window.end - window.start).total_seconds()


def forecast(cost: float, window: Window, as_of: datetime | None) -> float:
    """Month-end cost at the current pace (the cost itself once the month is over)."""
    share = elapsed_fraction(window, as_of)
    return cost / share if share > 0 else cost


def crossed(ratio: float | None, thresholds: Sequence[float]) -> float | None:
    """The highest threshold `ratio` reached, or None."""
    if ratio is None:
        return None
    hit = [t for t in thresholds if ratio >= t - 1e-12]
    return max(hit) if hit else None


def team_costs(bill: Bill) -> dict[str, float]:
    """Cost per team of the bill's lines (special lines left out)."""
    lines = bill.lines.filter(~pl.col("team").is_in(list(SPECIAL_LINES)))
    grouped = lines.group_by("team").agg(pl.col("cost").sum())
    return {str(t): float(c) for t, c in grouped.iter_rows()}


def budget_status(
    bill: Bill, settings: Settings, teams: Sequence[str] | None = None, *, now: datetime | None = None,
) -> pl.DataFrame:
    """One row per team with a budget or a bill line (or per `teams`): see `STATUS_SCHEMA`.
    Once the month is over (`now`, default the clock, past its end) the forecast is the cost."""
    costs = team_costs(bill)
    as_of = bill.window.end if (now or utcnow()) >= bill.window.end else bill.newest_sample
    budgets = settings.teams.budgets
    names = sorted(teams if teams is not None else set(costs) | set(budgets))
    rows = []
    for team in names:
        used = round(costs.get(team, 0.0), 2)
        ahead = round(forecast(used, bill.window, as_of), 2)
        budget = budgets.get(team)
        ratio = used / budget if budget else None
        f_ratio = ahead / budget if budget else None
        thresholds = settings.finance.thresholds_for(team)
        hit = crossed(ratio, thresholds)
        state = "no_budget" if not budget else "ok" if hit is None else "over" if hit >= 1 else "warning"
        rows.append({
            "team": team, "budget": budget, "used": used,
            "left": round(budget - used, 2) if budget else None, "used_ratio": ratio,
            "forecast": ahead, "forecast_ratio": f_ratio, "threshold": hit,
            "forecast_threshold": crossed(f_ratio, thresholds), "state": state,
        })
    return pl.DataFrame(rows, schema=STATUS_SCHEMA)


def cumulative_daily(detail: pl.DataFrame) -> pl.DataFrame:
    """Cost per day and its running total (the team chart's cumulative-vs-budget line)."""
    if detail.is_empty():
        return pl.DataFrame(schema={"day": pl.Date, "cost": pl.Float64, "cumulative": pl.Float64})
    daily = detail.group_by("day").agg(pl.col("cost").sum()).sort("day")
    return daily.with_columns(pl.col("cost").cum_sum().alias("cumulative"))


def alerts(status: pl.DataFrame, currency: str) -> list[dict[str, object]]:
    """The teams that crossed a threshold, as alert records (webhook, CLI, tests)."""
    out: list[dict[str, object]] = []
    for row in status.filter(pl.col("threshold").is_not_null()).iter_rows(named=True):
        out.append({
            "team": row["team"], "threshold": row["threshold"], "used": row["used"],
            "budget": row["budget"], "used_ratio": row["used_ratio"], "forecast": row["forecast"],
            "severity": "critical" if row["state"] == "over" else "warning",
            "summary": (f"{row['team']} used {row['used_ratio']:.0%} of its "
                        f"{row['budget']:,.2f} {currency} budget (threshold "
                        f"{row['threshold']:.0%}); month-end forecast {row['forecast']:,.2f} {currency}"),
        })
    return out


GAUGES: dict[str, str] = {
    "gpuledger_budget_used_ratio": "Share of the team's monthly budget used so far (1 = all of it).",
    "gpuledger_budget_forecast_ratio": "Month-end cost at the current pace over the team's budget.",
    "gpuledger_budget_threshold_crossed": "Highest alert threshold the team's use has reached "
                                          "(0: none; 0.8 = 80 %; 1 = the whole budget).",
    "gpuledger_budget_threshold_ratio": "The team's configured alert thresholds (finance.budget_thresholds "
                                        "or finance.team_thresholds), by level (warning, critical).",
}
"""The metrics `/metrics` exposes per team with a budget (label `team`; the threshold gauge adds
`level`); the chart's alert rules (`deploy/helm/gpuledger/files/gpuledger-rules.yaml`) compare
the used ratio against the threshold gauge, so no threshold is written into a rule."""


def threshold_levels(thresholds: Sequence[float]) -> dict[str, float]:
    """The two thresholds that change a team's `state`: `warning`, its lowest threshold below 1
    (where `ok` turns `warning`), and `critical`, its lowest threshold at 1 or above (where it
    turns `over`). A level with no such threshold is absent (that team never reaches it)."""
    below = [t for t in thresholds if t < 1]
    above = [t for t in thresholds if t >= 1]
    out: dict[str, float] = {}
    if below:
        out["warning"] = min(below)
    if above:
        out["critical"] = min(above)
    return out


def _ratio(value: float, budget: float) -> float:
    """Cost over budget; a zero budget is over (+Inf) as soon as anything is spent."""
    if budget > 0:
        return value / budget
    return float("inf") if value > 0 else 0.0


def budget_gauges(
    status: pl.DataFrame, settings: Settings,
) -> dict[str, list[tuple[dict[str, str], float]]]:
    """`GAUGES` as (labels, value) samples from `budget_status()`, for every team with a
    configured budget. A zero budget (`teams.budgets: {ads: 0}`: spend nothing) is a budget
    here: its ratio is +Inf once the team spends (every threshold crossed). The JSON and table
    views show it as `no_budget` because JSON has no infinity; the alert is what matters."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name in GAUGES}
    for row in status.filter(pl.col("budget").is_not_null()).iter_rows(named=True):
        team, budget = str(row["team"]), float(row["budget"])
        labels = {"team": team}
        thresholds = settings.finance.thresholds_for(team)
        used = _ratio(float(row["used"]), budget)
        out["gpuledger_budget_used_ratio"].append((labels, used))
        out["gpuledger_budget_forecast_ratio"].append((labels, _ratio(float(row["forecast"]), budget)))
        out["gpuledger_budget_threshold_crossed"].append((labels, crossed(used, thresholds) or 0.0))
        for level, value in threshold_levels(thresholds).items():
            out["gpuledger_budget_threshold_ratio"].append(({"team": team, "level": level}, value))
    return out
