"""Queues: per Kueue ClusterQueue (and Volcano Queue, whose metrics share the series), nominal
quota, borrowing, usage, pending workloads and admission wait over time; and the Volcano Queues'
guarantee / deserved / capability.

Admins and viewers see every ClusterQueue; a lead sees the ClusterQueues their teams' namespaces
submit to (through LocalQueues), and nothing else: the filter runs here, on the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl
from dash import html

from gpuledger.dashboards import figures
from gpuledger.dashboards.access import can_see_fleet
from gpuledger.dashboards.pages.common import (
    PageContext,
    check_team,
    graph,
    number,
    percent,
    refuse,
    section,
    table,
)
from gpuledger.dashboards.pages.team import queue_summary


@dataclass(frozen=True)
class QueuesView:
    period: str
    team: str | None
    series: pl.DataFrame
    summary: pl.DataFrame
    queues: list[str]
    volcano: pl.DataFrame = field(default_factory=pl.DataFrame)


def view(ctx: PageContext) -> QueuesView:
    data, state, who = ctx.data, ctx.state, ctx.principal
    series = data.queue_series(state.period)
    mapping = data.queue_teams()
    if state.team:
        check_team(ctx, state.team)
        allowed = {cq for cq, teams in mapping.items() if state.team in teams}
        series = series.filter(pl.col("cluster_queue").is_in(sorted(allowed)))
    elif not can_see_fleet(who):
        if not who.lead_of:
            refuse(who, "queues: no team is visible to you")
        allowed = {cq for cq, teams in mapping.items() if teams & who.lead_of}
        series = series.filter(pl.col("cluster_queue").is_in(sorted(allowed)))
    queues = sorted(series["cluster_queue"].unique().to_list()) if not series.is_empty() else []
    volcano = data.volcano_queues()
    if state.team or not can_see_fleet(who):
        seen = {state.team} if state.team else set(who.lead_of)
        volcano = volcano.filter(pl.col("queue").is_in(sorted(q for q, t in mapping.items() if t & seen)))
    return QueuesView(state.period, state.team, series, queue_summary(series), queues, volcano)


def render(v: QueuesView) -> html.Div:
    scope = v.period + (f" · queues of {v.team}" if v.team else "")
    summary = table(
        v.summary,
        [("cluster_queue", "ClusterQueue"), ("nominal_quota", "nominal quota (GPU-eq.)"),
         ("usage_mean", "mean use"),
         ("usage_max", "peak use"), ("quota_use", "quota use"), ("borrowed_mean", "mean borrowed"),
         ("pending_mean", "mean pending"), ("wait_min_mean", "mean wait (min)"),
         ("wait_min_p95", "p95 wait (min)")],
        id="queue-table",
        formats={"quota_use": percent, "wait_min_mean": number, "wait_min_p95": number},
    )
    return html.Div(
        [
            graph(_picture(v, scope), "queue-panels"),
            html.P(UNITS, className="muted", id="queue-units"),
            section("Per ClusterQueue", summary),
            *([section("Volcano Queues", table(
                v.volcano, [("queue", "Queue"), ("parent", "parent"), ("weight", "weight"),
                            ("guarantee_gpus", "guarantee GPUs"), ("deserved_gpus", "deserved GPUs"),
                            ("capability_gpus", "capability GPUs"), ("teams", "teams")],
                id="volcano-queue-table"))] if not v.volcano.is_empty() else []),
        ],
        id="queues-page",
    )


UNITS = (
    "Quota and use are in GPU-equivalents: an nvidia.com/gpu counts 1 (on time-sliced nodes each "
    "advertised replica counts 1, as Kueue counts it), a MIG instance counts its share of a card "
    "(a 3g slice is 3/7), the share the bill charges. Nominal quotas are promises, not cards: "
    "queues in a cohort lend unused quota to each other, so their sum can exceed the fleet."
)
"""What the numbers on this page count (the 'nominal GPUs' of many queues can add up past the
number of cards, which reads as a bug unless said)."""


def _picture(v: QueuesView, scope: str) -> object:
    """Few queues: the three stacked panels; many: small multiples, one panel per queue."""
    from gpuledger.dashboards.figures_teams import queue_multiples

    if len(v.queues) <= SMALL_MULTIPLES_FROM - 1:
        return figures.queue_panels(v.series, f"ClusterQueues · {scope}")
    return queue_multiples(v.series, f"GPU-equivalents in use vs nominal quota per ClusterQueue · {scope}")


SMALL_MULTIPLES_FROM = 5
"""From this many queues on, one panel per queue instead of overlapping lines."""


def show(ctx: PageContext) -> html.Div:
    """The page for the registry (`dashboards.registry`)."""
    return render(view(ctx))
