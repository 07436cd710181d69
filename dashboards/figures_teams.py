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


def queue_multiples(series: pl.DataFrame, title: str, columns: int = 4) -> Figure:
    """Small multiples: one panel per ClusterQueue (GPUs in use, filled; nominal quota, dotted),
    instead of every queue's lines drawn over each other. Each panel has its own y-axis,
    since a 4-GPU queue beside a 64-GPU one would read as a flat line."""
    from gpuledger.dashboards.figures import _iso, bin_hours

    if series.is_empty():
        return empty(title, "no Kueue samples in this period", 300)
    series = bin_hours(series, ["cluster_queue"], {"usage": "mean", "nominal_quota": "mean"})
    queues = sorted(series["cluster_queue"].unique().to_list())
    rows = -(-len(queues) // columns)
    gap_x, gap_y = 0.04, 0.09 if rows > 1 else 0.0
    width, height = (1 - gap_x * (columns - 1)) / columns, (1 - gap_y * (rows - 1)) / rows
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {}
    annotations = []
    for i, cq in enumerate(queues):
        r, c = divmod(i, columns)
        n = "" if i == 0 else str(i + 1)
        x0, y1 = c * (width + gap_x), 1 - r * (height + gap_y)
        part = series.filter(pl.col("cluster_queue") == cq).sort("hour")
        hours = _iso(part["hour"])
        data += [
            {"type": "scatter", "mode": "lines", "x": hours, "y": part["usage"].to_list(), "name": "in use",
             "fill": "tozeroy", "line": {"color": "#2563eb", "width": 1}, "xaxis": f"x{n}", "yaxis": f"y{n}",
             "showlegend": i == 0, "legendgroup": "use",
             "hovertemplate": f"{cq}<br>%{{x}}<br>%{{y:.1f}} GPU-equivalents in use<extra></extra>"},
            {"type": "scatter", "mode": "lines", "x": hours, "y": part["nominal_quota"].to_list(),
             "name": "nominal quota", "line": {"color": "#dc2626", "dash": "dot", "width": 1.5},
             "xaxis": f"x{n}", "yaxis": f"y{n}", "showlegend": i == 0, "legendgroup": "quota"},
        ]
        layout[f"xaxis{n}"] = {"domain": [x0, x0 + width], "anchor": f"y{n}", "type": "date",
                               "showticklabels": r == rows - 1, "tickformat": "%d", "nticks": 5}
        layout[f"yaxis{n}"] = {"domain": [y1 - height, y1], "anchor": f"x{n}", "rangemode": "tozero",
                               "nticks": 4}
        annotations.append({"text": cq, "showarrow": False, "xref": "paper", "yref": "paper",
                            "x": x0 + width / 2, "y": y1, "xanchor": "center", "yanchor": "bottom",
                            "font": {"size": 11}})
    return _figure(data, title, max(300, 40 + 150 * rows), annotations=annotations,
                   legend={"orientation": "h", "y": -0.06, "x": 0}, **layout)
