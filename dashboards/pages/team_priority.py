"""The team page's priority and preemption section: cost by PriorityClass, and the GPU time
the team's preempted pods threw away.

Both come from the same monthly bill as the rest of the page (`analytics.billing.bill.compute_bill`
by `("team", "priority_class")`, and the bill's `preemption` frame from
`analytics.billing.preemption`), so the page and `gpuledger bill --by priority_class` agree to the
cent. The preemption figures are part of the team's billed card-hours, not added to them.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from dash import html

from gpuledger.dashboards.pages.common import money, number, section, table


def by_priority_class(data: Any, period: str, team: str) -> pl.DataFrame:
    """The team's bill lines per PriorityClass: card-hours, idle card-hours and cost."""
    lines: pl.DataFrame = data.bill(period, ("team", "priority_class")).lines
    return (lines.filter(pl.col("team") == team)
            .select("priority_class", "card_hours", "idle_card_hours", "cost")
            .sort("cost", descending=True))


def preemption_losses(data: Any, period: str, team: str) -> pl.DataFrame:
    """The team's preemption losses per queue and PriorityClass, largest first."""
    frame = data.bill(period).preemption
    if frame is None or frame.is_empty():
        return pl.DataFrame()
    return frame.filter(pl.col("team") == team).drop("team")


def render(by_class: pl.DataFrame | None, losses: pl.DataFrame | None, currency: str) -> html.Section:
    cur = currency
    by_class = by_class if by_class is not None else pl.DataFrame()
    losses = losses if losses is not None else pl.DataFrame()
    fmt = {"card_hours": number, "idle_card_hours": number, "lost_gpu_hours": number,
           "cost": lambda x: money(x, cur), "lost_cost": lambda x: money(x, cur)}
    lost_h = float(losses["lost_gpu_hours"].sum()) if not losses.is_empty() else 0.0
    lost_c = float(losses["lost_cost"].sum()) if not losses.is_empty() else 0.0
    headline = html.P(f"GPU-hours lost to preemption: {number(lost_h)} ({money(lost_c, cur)})",
                      id="preemption-line")
    return section(
        "Priority classes and preemption",
        table(by_class, [("priority_class", "PriorityClass"), ("card_hours", "GPU-hours"),
                         ("idle_card_hours", "idle GPU-hours"), ("cost", f"cost ({cur})")],
              id="team-priority-table", formats=fmt),
        headline,
        table(losses, [("queue", "queue"), ("priority_class", "PriorityClass"),
                       ("preemptions", "preemptions"), ("lost_gpu_hours", "GPU-hours lost"),
                       ("lost_cost", f"lost ({cur})")], id="team-preemption-table", formats=fmt),
    )
