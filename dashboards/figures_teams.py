"""The pictures of all teams at once, and the budget line on a team's daily chart.

Kept apart from `dashboards.figures` (which holds the shared look) so that module stays small;
the look, the template and the empty-chart message are the same ones.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpuledger.dashboards.colours import team_colours
from gpuledger.dashboards.figures import Figure, _figure, empty


def daily_by_team(daily: pl.DataFrame, currency: str, title: str) -> Figure:
    """Stacked bars of cost per day and team (`daily`: day, team, cost), biggest team lowest."""
    if daily.is_empty():
        return empty(title, "no usage in this period")
    totals = daily.group_by("team").agg(pl.col("cost").sum()).sort(["cost", "team"], descending=[True, False])
    order = totals["team"].to_list()
    colours = team_colours(order)
    data: list[dict[str, Any]] = []
    for team in order:
        part = daily.filter(pl.col("team") == team).sort("day")
        data.append({"type": "bar", "x": part["day"].to_list(), "y": part["cost"].to_list(), "name": team,
                     "marker": {"color": colours[team]},
                     "hovertemplate": f"{team}<br>%{{x|%b %d}}<br>%{{y:,.2f}} {currency}<extra></extra>"})
    return _figure(data, title, 380, barmode="stack", yaxis={"title": {"text": currency}},
                   xaxis={"type": "date", "tickformat": "%b %d", "dtick": 86400000},
                   legend={"orientation": "v", "x": 1.01, "y": 1},
                   margin={"l": 60, "r": 140, "t": 48, "b": 40})


def with_budget_line(figure: Figure, cumulative: pl.DataFrame, budget: float | None, currency: str) -> Figure:
    """Add the running total (right axis) and, when set, the budget to a daily cost chart."""
    if cumulative.is_empty() or not figure.get("data"):
        return figure
    days = cumulative["day"].to_list()
    data = list(figure["data"])
    data.append({"type": "scatter", "mode": "lines", "x": days, "y": cumulative["cumulative"].to_list(),
                 "name": "cumulative cost", "yaxis": "y2", "line": {"color": "#111827", "width": 2}})
    if budget:
        data.append({"type": "scatter", "mode": "lines", "x": [days[0], days[-1]], "y": [budget, budget],
                     "name": f"budget {budget:,.0f} {currency}", "yaxis": "y2",
                     "line": {"color": "#dc2626", "dash": "dash", "width": 2}})
    top = max([*cumulative["cumulative"].to_list(), budget or 0.0]) * 1.05
    layout = {**figure["layout"], "yaxis2": {"overlaying": "y", "side": "right", "rangemode": "tozero",
                                             "range": [0, top], "showgrid": False,
                                             "title": {"text": f"cumulative ({currency})"}}}
    return {"data": data, "layout": layout}
