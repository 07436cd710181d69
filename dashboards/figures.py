"""Plotly figures for the pages: one function per picture, from small Polars frames.

Why a module of its own: every page leads with a picture, and the pictures share one look
(white background, tight margins, a fixed colour per sharing mode and status) so a lead who
learns one page can read the others. The functions take already-aggregated frames; nothing
here queries the warehouse.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import polars as pl

PALETTE = (
    "#2563eb", "#f97316", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04",
    "#db2777", "#4b5563", "#65a30d", "#7c3aed", "#0d9488",
)
MODE_COLORS = {"exclusive": "#2563eb", "mig": "#16a34a", "timeslice": "#f97316", "vgpu": "#9333ea"}
STATUS_COLORS = {
    "proposed": "#2563eb", "approved": "#16a34a", "applying": "#ca8a04", "applied": "#065f46",
    "failed": "#dc2626", "rolled_back": "#6b7280", "rejected": "#9ca3af", "expired": "#d1d5db",
    "stale": "#d1d5db",
}
IDLE_COLOR = "#9ca3af"
STRANDED_COLOR = "#fecaca"
FREE_COLOR = "#e5e7eb"


def _layout(fig: go.Figure, title: str, height: int = 340, **extra: Any) -> go.Figure:
    settings: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "font": {"size": 15}},
        "template": "plotly_white",
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 48, "b": 40},
        "legend": {"orientation": "h", "y": -0.18, "x": 0},
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
    }
    fig.update_layout(**{**settings, **extra})
    return fig


def color_for(names: list[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(names))}


def empty(title: str, message: str, height: int = 260) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, font={"size": 14, "color": "#6b7280"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, height)


def daily_cost(daily: pl.DataFrame, currency: str, title: str) -> go.Figure:
    """Stacked bars of cost per day and GPU model, with the idle part as a line."""
    if daily.is_empty():
        return empty(title, "no usage in this period")
    fig = go.Figure()
    colors = color_for(daily["model"].unique().to_list())
    for model in sorted(colors):
        part = daily.filter(pl.col("model") == model).sort("day")
        fig.add_bar(x=part["day"].to_list(), y=part["cost"].to_list(), name=model, marker_color=colors[model])
    idle = daily.group_by("day").agg(pl.col("idle_cost").sum()).sort("day")
    fig.add_scatter(
        x=idle["day"].to_list(), y=idle["idle_cost"].to_list(), name="of which idle",
        mode="lines+markers", line={"color": "#111827", "dash": "dot"},
    )
    return _layout(fig, title, barmode="stack", yaxis_title=currency,
                   xaxis={"type": "date", "tickformat": "%b %d", "dtick": 86400000})


def cost_by_model_mode(frame: pl.DataFrame, currency: str) -> go.Figure:
    """Horizontal bars: cost per GPU model, split by sharing mode."""
    title = "Cost by GPU model and sharing mode"
    if frame.is_empty():
        return empty(title, "no usage in this period")
    fig = go.Figure()
    for mode in [m for m in MODE_COLORS if m in frame["sharing_mode"].to_list()]:
        part = frame.filter(pl.col("sharing_mode") == mode)
        fig.add_bar(
            y=part["model"].to_list(), x=part["cost"].to_list(), name=mode, orientation="h",
            marker_color=MODE_COLORS[mode],
        )
    return _layout(fig, title, 300, barmode="stack", xaxis_title=currency)


def heatmap(frame: pl.DataFrame, row: str, title: str) -> go.Figure:
    """Activity (0–1) per `row` (node or GPU) and hour."""
    if frame.is_empty():
        return empty(title, "no GPU samples in this period", 300)
    wide = frame.pivot(on="hour", index=row, values="activity", aggregate_function="mean").sort(row)
    hours = [c for c in wide.columns if c != row]
    rows = [str(v) for v in wide[row].to_list()]
    z = wide.select(hours).to_numpy()
    fig = go.Figure(
        go.Heatmap(
            z=z, x=hours, y=rows, zmin=0, zmax=1, colorscale="Viridis",
            colorbar={"title": {"text": "active"}, "tickformat": ".0%"},
            hovertemplate="%{y}<br>%{x}<br>activity %{z:.0%}<extra></extra>",
        )
    )
    height = max(320, min(900, 60 + 14 * len(rows)))
    return _layout(fig, title, height, yaxis={"autorange": "reversed"})


def fleet_hours(daily: pl.DataFrame) -> go.Figure:
    """Stacked areas per day: active, allocated-but-idle, unallocated card-hours."""
    title = "Card-hours per day: active, allocated but idle, unallocated"
    if daily.is_empty():
        return empty(title, "no card-hours in this period")
    fig = go.Figure()
    for col, name, color in (
        ("active_card_hours", "active", "#16a34a"),
        ("idle_card_hours", "allocated, idle", "#f97316"),
        ("unallocated_card_hours", "unallocated", IDLE_COLOR),
    ):
        fig.add_scatter(
            x=daily["day"].to_list(), y=daily[col].to_list(), name=name, stackgroup="hours",
            mode="lines", line={"width": 0.5, "color": color},
        )
    return _layout(fig, title, 320, yaxis_title="card-hours")


def unallocated(frame: pl.DataFrame, currency: str) -> go.Figure:
    title = "Unallocated capacity per pool and model"
    if frame.is_empty():
        return empty(title, "no unallocated capacity", 280)
    labels = [f"{p} · {m}" for p, m in zip(frame["pool"].to_list(), frame["model"].to_list(), strict=True)]
    fig = go.Figure(
        go.Bar(
            x=frame["card_hours"].to_list(), y=labels, orientation="h", marker_color=IDLE_COLOR,
            customdata=frame["cost"].to_list(),
            hovertemplate=(
                f"%{{y}}<br>%{{x:,.0f}} card-hours<br>%{{customdata:,.2f}} {currency}<extra></extra>"
            ),
        )
    )
    return _layout(fig, title, max(240, 60 + 28 * len(labels)), xaxis_title="card-hours")


def mig_map(cells: pl.DataFrame, title: str) -> go.Figure:
    """One row per MIG GPU, eight memory slices across: instances coloured by owner team,
    free slices grey and stranded slices (free but unusable by any profile) pink."""
    if cells.is_empty():
        return empty(title, "no MIG GPUs in this selection", 240)
    fig = go.Figure()
    owners = [o for o in cells["owner"].unique().to_list() if o not in ("free", "stranded")]
    colors = {**color_for(owners), "free": FREE_COLOR, "stranded": STRANDED_COLOR}
    for owner in [*sorted(owners), "free", "stranded"]:
        part = cells.filter(pl.col("owner") == owner)
        if part.is_empty():
            continue
        fig.add_bar(
            y=part["gpu"].to_list(), x=part["size"].to_list(), base=part["start"].to_list(),
            orientation="h", name=owner,
            marker={"color": colors[owner], "line": {"color": "white", "width": 2}},
            text=part["label"].to_list(), textposition="inside", insidetextanchor="middle",
            customdata=part["hover"].to_list(), hovertemplate="%{y}<br>%{customdata}<extra></extra>",
        )
    gpus = cells["gpu"].unique(maintain_order=True).to_list()
    return _layout(
        fig, title, max(240, 70 + 30 * len(gpus)), barmode="overlay",
        xaxis={"range": [0, 8], "dtick": 1, "title": "memory slice"},
        yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": gpus},
    )


def queue_panels(series: pl.DataFrame, title: str) -> go.Figure:
    """Three stacked panels over time per ClusterQueue: usage vs nominal quota, pending
    workloads, mean admission wait."""
    from plotly.subplots import make_subplots

    if series.is_empty():
        return empty(title, "no Kueue samples in this period", 300)
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=("GPUs in use (dotted: nominal quota)", "pending workloads", "admission wait (min)"),
    )
    queues = sorted(series["cluster_queue"].unique().to_list())
    colors = color_for(queues)
    for cq in queues:
        part = series.filter(pl.col("cluster_queue") == cq).sort("hour")
        hours = part["hour"].to_list()
        color = colors[cq]
        fig.add_scatter(x=hours, y=part["usage"].to_list(), name=cq, legendgroup=cq,
                        line={"color": color}, row=1, col=1)
        fig.add_scatter(x=hours, y=part["nominal_quota"].to_list(), name=f"{cq} quota", legendgroup=cq,
                        showlegend=False, line={"color": color, "dash": "dot"}, row=1, col=1)
        fig.add_scatter(x=hours, y=part["pending_workloads"].to_list(), name=cq, legendgroup=cq,
                        showlegend=False, line={"color": color}, row=2, col=1)
        waits = [None if w is None else w / 60 for w in part["admission_wait_s"].to_list()]
        fig.add_scatter(x=hours, y=waits, name=cq, legendgroup=cq, showlegend=False,
                        line={"color": color}, row=3, col=1)
    return _layout(fig, title, 620, legend={"orientation": "h", "y": -0.08, "x": 0})


def plan_savings(plans: pl.DataFrame, currency: str) -> go.Figure:
    title = "Plans: expected monthly saving and GPUs freed"
    if plans.is_empty():
        return empty(title, "no plans yet: run `gpuledger plan mig` or `gpuledger plan quota`", 240)
    fig = go.Figure()
    for status in [s for s in STATUS_COLORS if s in plans["status"].to_list()]:
        part = plans.filter(pl.col("status") == status)
        fig.add_bar(
            x=part["plan_id"].to_list(), y=part["saving"].to_list(), name=status,
            marker_color=STATUS_COLORS[status], customdata=part["gpus_freed"].to_list(),
            hovertemplate=(
                f"%{{x}}<br>saving %{{y:,.2f}} {currency}/month<br>GPUs freed %{{customdata}}<extra></extra>"
            ),
        )
    return _layout(fig, title, 280, yaxis_title=f"{currency} / month", xaxis={"type": "category"})
