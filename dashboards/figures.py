"""Plotly figures for the pages: one function per picture, from small Polars frames.

Why a module of its own: every page leads with a picture, and the pictures share one look
(white background, tight margins, a fixed colour per sharing mode and status) so a lead who
learns one page can read the others. The functions take already-aggregated frames; nothing
here queries the warehouse.

Figures are plain plotly.js dictionaries (`{"data": [...], "layout": {...}}`), not
`plotly.graph_objects`: building graph objects validates every property in Python, which
cost more than half a second per page for a month of queue series, and the browser does not
need it. The look comes from plotly's `plotly_white` template, converted once.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import polars as pl

Figure = dict[str, Any]

PALETTE = (
    "#2563eb", "#f97316", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04",
    "#db2777", "#4b5563", "#65a30d", "#7c3aed", "#0d9488",
)
MODE_COLORS = {"exclusive": "#2563eb", "mig": "#16a34a", "timeslice": "#f97316", "vgpu": "#9333ea"}
STATUS_COLORS = {
    "proposed": "#2563eb", "approved": "#16a34a", "applying": "#ca8a04", "applied": "#065f46",
    "failed": "#dc2626", "rolled_back": "#6b7280", "rejected": "#9ca3af", "expired": "#d1d5db",
    "stale": "#d1d5db", "superseded": "#d1d5db",
}
IDLE_COLOR = "#9ca3af"
STRANDED_COLOR = "#fecaca"
FREE_COLOR = "#e5e7eb"
VIRIDIS = "Viridis"


@cache
def _template() -> dict[str, Any]:
    """The 2-D parts of plotly's `plotly_white` template (polar, 3-D and map parts dropped)."""
    import plotly.io as pio

    layout = pio.templates["plotly_white"].to_plotly_json()["layout"]
    keep = ("autotypenumbers", "colorway", "font", "hovermode", "hoverlabel", "paper_bgcolor",
            "plot_bgcolor", "xaxis", "yaxis", "shapedefaults", "annotationdefaults", "title")
    return {"layout": {k: layout[k] for k in keep if k in layout}}


def _figure(data: list[dict[str, Any]], title: str, height: int = 340, **layout: Any) -> Figure:
    base: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "font": {"size": 15}},
        "template": _template(),
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 48, "b": 40},
        "legend": {"orientation": "h", "y": -0.18, "x": 0},
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
    }
    return {"data": data, "layout": {**base, **layout}}


def color_for(names: list[str]) -> dict[str, str]:
    """A stable colour per name (`dashboards.colours`): a team or model looks the same on
    every chart."""
    from gpuledger.dashboards.colours import colours_for

    return colours_for(names)


def empty(title: str, message: str, height: int = 260) -> Figure:
    return _figure(
        [], title, height,
        annotations=[{"text": message, "showarrow": False, "font": {"size": 14, "color": "#6b7280"},
                      "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}],
        xaxis={"visible": False}, yaxis={"visible": False},
    )


def daily_cost(daily: pl.DataFrame, currency: str, title: str) -> Figure:
    """Stacked bars of cost per day and GPU model, with the idle part as a line."""
    if daily.is_empty():
        return empty(title, "no usage in this period")
    from gpuledger.dashboards.colours import model_colours

    colors = model_colours(daily["model"].unique().to_list())
    data: list[dict[str, Any]] = []
    for model in sorted(colors):
        part = daily.filter(pl.col("model") == model).sort("day")
        data.append({"type": "bar", "x": part["day"].to_list(), "y": part["cost"].to_list(), "name": model,
                     "marker": {"color": colors[model]}})
    idle = daily.group_by("day").agg(pl.col("idle_cost").sum()).sort("day")
    data.append({"type": "scatter", "x": idle["day"].to_list(), "y": idle["idle_cost"].to_list(),
                 "name": "of which idle", "mode": "lines+markers",
                 "line": {"color": "#111827", "dash": "dot"}})
    return _figure(data, title, barmode="stack", yaxis={"title": {"text": currency}},
                   xaxis={"type": "date", "tickformat": "%b %d", "dtick": 86400000})


def cost_by_model_mode(frame: pl.DataFrame, currency: str) -> Figure:
    """Horizontal bars: cost per GPU model, split by sharing mode."""
    title = "Cost by GPU model and sharing mode"
    if frame.is_empty():
        return empty(title, "no usage in this period")
    data = []
    for mode in [m for m in MODE_COLORS if m in frame["sharing_mode"].to_list()]:
        part = frame.filter(pl.col("sharing_mode") == mode)
        data.append({"type": "bar", "orientation": "h", "y": part["model"].to_list(),
                     "x": part["cost"].to_list(), "name": mode, "marker": {"color": MODE_COLORS[mode]}})
    return _figure(data, title, 300, barmode="stack", xaxis={"title": {"text": currency}})


MAX_COLUMNS = 240
"""Time columns (or points per line) a chart gets at most: a month of hours is binned to 3 h.
A 1,200-pixel chart cannot show more, and every point costs JSON and browser time."""


def bin_hours(frame: pl.DataFrame, keys: list[str], values: dict[str, str]) -> pl.DataFrame:
    """Hourly rows binned to at most `MAX_COLUMNS` time steps per key; `values` maps each
    column to how it combines (`mean` or `max`)."""
    if frame.is_empty():
        return frame
    span = frame.select((pl.col("hour").max() - pl.col("hour").min()).dt.total_hours()).item()
    bins = max(1, -(-(int(span or 0) + 1) // MAX_COLUMNS))
    if bins == 1:
        return frame
    agg = [getattr(pl.col(c), how)().alias(c) for c, how in values.items()]
    return (
        frame.with_columns(pl.col("hour").dt.truncate(f"{bins}h"))
        .group_by([*keys, "hour"]).agg(agg).sort([*keys, "hour"])
    )


def _iso(column: pl.Series) -> list[str]:
    """UTC timestamps as ISO strings (plotly.js parses them; far cheaper to encode)."""
    return column.dt.to_string("%Y-%m-%d %H:%M").to_list()


def heatmap(frame: pl.DataFrame, row: str, title: str) -> Figure:
    """Activity (0–1) per `row` (node or GPU) and hour (binned to `MAX_COLUMNS` columns)."""
    import numpy as np

    if frame.is_empty():
        return empty(title, "no GPU samples in this period", 300)
    cells = bin_hours(frame.select(pl.col(row).cast(pl.String), "hour", "activity"), [row],
                      {"activity": "mean"})
    rows = sorted(cells[row].unique().to_list())
    hours = cells["hour"].unique().sort()
    index = cells.with_columns(
        pl.col(row).replace_strict(rows, list(range(len(rows))), return_dtype=pl.Int64).alias("_r"),
        pl.col("hour").rank("dense").cast(pl.Int64).sub(1).alias("_h"),
    )
    z = np.full((len(rows), hours.len()), np.nan)
    z[index["_r"].to_numpy(), index["_h"].to_numpy()] = index["activity"].fill_null(np.nan).to_numpy()
    # Every row labelled (issue 32: plotly skipped every other node when rows were 14 px): a row
    # is ROW_PX tall, room for its 10 px label, and the ticks name each row explicitly.
    height = max(320, 90 + ROW_PX * len(rows))
    return _figure(
        [{"type": "heatmap", "z": np.round(z, 4), "x": _iso(hours), "y": rows, "zmin": 0, "zmax": 1,
          "colorscale": VIRIDIS, "colorbar": {"title": {"text": "active"}, "tickformat": ".0%"},
          "hovertemplate": "%{y}<br>%{x}<br>activity %{z:.0%}<extra></extra>"}],
        title, height, xaxis={"type": "date"},
        yaxis={"autorange": "reversed", "type": "category", "tickmode": "array", "tickvals": rows,
               "ticktext": rows, "tickfont": {"size": 10}, "automargin": True},
    )


ROW_PX = 16
"""Pixels per heatmap row: every row's 10 px label fits without plotly thinning the ticks."""


def fleet_hours(daily: pl.DataFrame) -> Figure:
    """Stacked areas per day: active, allocated-but-idle, unallocated card-hours."""
    title = "GPU-hours per day: active, allocated but idle, unallocated"
    if daily.is_empty():
        return empty(title, "no GPU-hours in this period")
    data = [
        {"type": "scatter", "x": daily["day"].to_list(), "y": daily[col].to_list(), "name": name,
         "stackgroup": "hours", "mode": "lines", "line": {"width": 0.5, "color": color}}
        for col, name, color in (
            ("active_card_hours", "active", "#16a34a"),
            ("idle_card_hours", "allocated, idle", "#f97316"),
            ("unallocated_card_hours", "unallocated", IDLE_COLOR),
        )
    ]
    return _figure(data, title, 320, yaxis={"title": {"text": "GPU-hours"}})


def unallocated(frame: pl.DataFrame, currency: str) -> Figure:
    title = "Unallocated capacity per pool and model"
    if frame.is_empty():
        return empty(title, "no unallocated capacity", 280)
    labels = [f"{p} · {m}" for p, m in zip(frame["pool"].to_list(), frame["model"].to_list(), strict=True)]
    data = [{
        "type": "bar", "orientation": "h", "x": frame["card_hours"].to_list(), "y": labels,
        "marker": {"color": IDLE_COLOR}, "customdata": frame["cost"].to_list(),
        "hovertemplate": (
            f"%{{y}}<br>%{{x:,.0f}} GPU-hours<br>%{{customdata:,.2f}} {currency}<extra></extra>"
        ),
    }]
    return _figure(data, title, max(240, 60 + 28 * len(labels)), xaxis={"title": {"text": "GPU-hours"}})


def mig_map(cells: pl.DataFrame, title: str) -> Figure:
    """One row per MIG GPU, eight memory slices across: instances coloured by owner team,
    free instances grey and stranded slices (in no instance) pink."""
    if cells.is_empty():
        return empty(title, "no MIG GPUs in this selection", 240)
    owners = [o for o in cells["owner"].unique().to_list() if o not in ("free", "stranded")]
    colors = {**color_for(owners), "free": FREE_COLOR, "stranded": STRANDED_COLOR}
    data = []
    for owner in [*sorted(owners), "free", "stranded"]:
        part = cells.filter(pl.col("owner") == owner)
        if part.is_empty():
            continue
        data.append({
            "type": "bar", "orientation": "h", "y": part["gpu"].to_list(), "x": part["size"].to_list(),
            "base": part["start"].to_list(), "name": owner,
            "marker": {"color": colors[owner], "line": {"color": "white", "width": 2}},
            "text": part["label"].to_list(), "textposition": "inside", "insidetextanchor": "middle",
            "customdata": part["hover"].to_list(), "hovertemplate": "%{y}<br>%{customdata}<extra></extra>",
        })
    gpus = cells["gpu"].unique(maintain_order=True).to_list()
    return _figure(
        data, title, max(240, 70 + 30 * len(gpus)), barmode="overlay",
        xaxis={"range": [0, 8], "dtick": 1, "title": {"text": "memory slice"}},
        yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": gpus},
    )


def queue_panels(series: pl.DataFrame, title: str) -> Figure:
    """Three stacked panels over time per ClusterQueue: usage vs nominal quota, pending
    workloads, mean admission wait."""
    if series.is_empty():
        return empty(title, "no Kueue samples in this period", 300)
    series = bin_hours(series, ["cluster_queue"], {
        "usage": "mean", "nominal_quota": "mean", "pending_workloads": "mean", "admission_wait_s": "mean",
    })
    queues = sorted(series["cluster_queue"].unique().to_list())
    colors = color_for(queues)
    data: list[dict[str, Any]] = []
    for cq in queues:
        part = series.filter(pl.col("cluster_queue") == cq).sort("hour")
        hours = _iso(part["hour"])
        line = {"color": colors[cq]}
        waits = [None if w is None else w / 60 for w in part["admission_wait_s"].to_list()]
        data += [
            {"type": "scatter", "mode": "lines", "x": hours, "y": part["usage"].to_list(), "name": cq,
             "legendgroup": cq, "line": line, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines", "x": hours, "y": part["nominal_quota"].to_list(),
             "name": f"{cq} quota", "legendgroup": cq, "showlegend": False,
             "line": {**line, "dash": "dot"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines", "x": hours, "y": part["pending_workloads"].to_list(),
             "name": cq, "legendgroup": cq, "showlegend": False, "line": line, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "lines", "x": hours, "y": waits, "name": cq, "legendgroup": cq,
             "showlegend": False, "line": line, "xaxis": "x3", "yaxis": "y3"},
        ]
    titles = ("GPUs in use (dotted: nominal quota)", "pending workloads", "admission wait (min)")
    domains = ((0.70, 1.0), (0.36, 0.64), (0.0, 0.30))
    annotations = [
        {"text": t, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": d[1],
         "xanchor": "center", "yanchor": "bottom", "font": {"size": 13}}
        for t, d in zip(titles, domains, strict=True)
    ]
    axes: dict[str, Any] = {}
    for i, domain in enumerate(domains, start=1):
        suffix = "" if i == 1 else str(i)
        axes[f"yaxis{suffix}"] = {"domain": list(domain), "anchor": f"x{suffix}", "rangemode": "tozero"}
        axes[f"xaxis{suffix}"] = {"anchor": f"y{suffix}", "showticklabels": i == 3, "type": "date",
                                  **({"matches": "x"} if i > 1 else {})}
    return _figure(data, title, 620, annotations=annotations,
                   legend={"orientation": "h", "y": -0.08, "x": 0}, **axes)


def plan_savings(plans: pl.DataFrame, currency: str) -> Figure:
    title = "Plans: expected monthly saving and GPUs freed"
    if plans.is_empty():
        return empty(title, "no plans yet: run `gpuledger plan mig` or `gpuledger plan quota`", 240)
    data = []
    for status in [s for s in STATUS_COLORS if s in plans["status"].to_list()]:
        part = plans.filter(pl.col("status") == status)
        data.append({
            "type": "bar", "x": part["plan_id"].to_list(), "y": part["saving"].to_list(), "name": status,
            "marker": {"color": STATUS_COLORS[status]}, "customdata": part["gpus_freed"].to_list(),
            "hovertemplate": (
                f"%{{x}}<br>saving %{{y:,.2f}} {currency}/month<br>GPUs freed %{{customdata}}<extra></extra>"
            ),
        })
    return _figure(data, title, 280, yaxis={"title": {"text": f"{currency} / month"}},
                   xaxis={"type": "category"})
