"""My team: this month's cost against last month and budget, where it went, what sat idle.

Numbers come from the monthly bill (`analytics.billing.bill.compute_bill`, the same function the
`gpuledger bill` command prints), so the page and the CLI agree to the cent: the headline cost
and card-hours are the team's bill line (`by=("team",)`, or `("team", "model")` when a model is
picked); the charts are the bill's `detail` rows of that team, aggregated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
from dash import html

from gpuledger.core.period import Period
from gpuledger.dashboards import figures
from gpuledger.dashboards.pages import pending, team_priority
from gpuledger.dashboards.pages.common import (
    PageContext,
    bill_banner,
    check_team,
    graph,
    kpi,
    money,
    number,
    percent,
    refuse,
    results_note,
    rules_warning,
    section,
    table,
    visible_team,
    where_data,
)
from gpuledger.dashboards.serving_results import RECOMMENDATIONS, TOKEN_COSTS

_LINE_FIELDS = ("cost", "card_hours", "idle_cost", "idle_card_hours", "list_cost", "sharing_discount")


@dataclass(frozen=True)
class TeamView:
    team: str
    period: str
    model: str | None
    currency: str
    line: dict[str, float]
    previous: dict[str, float] | None
    budget: float | None
    daily: pl.DataFrame
    by_model_mode: pl.DataFrame
    idle_top: pl.DataFrame
    queues: pl.DataFrame
    queue_summary: pl.DataFrame
    tokens: pl.DataFrame
    download_href: str
    by_priority_class: pl.DataFrame | None = None
    preemption: pl.DataFrame | None = None
    budget_state: dict[str, Any] | None = None
    """The team's row of `analytics.billing.budgets.budget_status` (used, left, forecast, threshold)."""
    cumulative: pl.DataFrame | None = None
    empty_note: str | None = None
    """Set when the month has no usage at all: where data exists instead."""
    results_note: str | None = None
    """Set when the stored recommendations or token costs were computed under other rules than
    the server's (`ReadModel.result_note`)."""
    bill_notes: tuple[str, ...] = ()
    """The month's bill's notes (`ReadModel.bill_notes`), shown above the numbers."""


def bill_line(bill: Any, team: str, model: str | None) -> dict[str, float]:
    """The team's line of a bill (zeros when the team has none this month)."""
    lines: pl.DataFrame = bill.lines
    cond = pl.col("team") == team
    if model is not None:
        cond &= pl.col("model") == model
    rows = lines.filter(cond)
    return {f: float(rows[f].sum()) if f in rows.columns else 0.0 for f in _LINE_FIELDS}


def _team_detail(bill: Any, team: str, model: str | None) -> pl.DataFrame:
    detail: pl.DataFrame = bill.detail
    cond = pl.col("team") == team
    if model is not None:
        cond &= pl.col("model") == model
    return detail.filter(cond)


def idle_top(allocations: pl.DataFrame, workloads: pl.DataFrame, recommendations: pl.DataFrame,
             team: str, *, model: str | None, currency: str, limit: int = 10) -> pl.DataFrame:
    """The team's workloads with the most idle cost (`analytics.workloads.idle.idle_workloads`: a
    Deployment's replicas and a multi-GPU pod's cards are one row), each with the
    recommendations `analytics.workloads.recommend` makes for that workload (if any)."""
    from gpuledger.analytics.workloads.idle import idle_workloads

    if model is not None:
        allocations = allocations.filter(pl.col("model") == model)
    top = idle_workloads(allocations, workloads, team=team).head(limit)
    holder = pl.format("{} {} ({} pod(s), {} GPU(s))", pl.col("workload_kind"), pl.col("workload"),
                       pl.col("pods"), pl.col("gpus"))
    top = top.with_columns(holder.alias("holder"))
    if recommendations.is_empty():
        return top.with_columns(pl.lit(None, pl.String).alias("recommendation"))
    advice = (
        recommendations.filter(pl.col("team") == team)
        .with_columns(pl.concat_str([
            pl.format("{} — {}", pl.col("recommended"), pl.col("reason")), pl.lit(" (saves "),
            pl.col("monthly_saving").map_elements(lambda x: money(x, currency), pl.String),
            pl.lit("/month)")]).alias("advice"))
        .group_by("namespace", "workload_kind", "workload")
        .agg(pl.col("advice").str.join("; ").alias("recommendation"))
    )
    return top.join(advice, on=["namespace", "workload_kind", "workload"], how="left")


def _charts(detail: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    daily = (
        detail.group_by("day", "model").agg(pl.col("cost").sum(), pl.col("idle_cost").sum()).sort("day")
    )
    by_model_mode = (
        detail.group_by("model", "sharing_mode")
        .agg(pl.col("card_hours").sum(), pl.col("cost").sum(), pl.col("idle_cost").sum())
        .sort("model", "sharing_mode")
    )
    return daily, by_model_mode


def view(ctx: PageContext) -> TeamView:
    """Everything the team page shows; refuses (server-side) a team the principal may not see."""
    data, state = ctx.data, ctx.state
    teams = data.teams(state.period)
    team = visible_team(ctx, teams)
    if team is None:
        refuse(ctx.principal, "any team's page: no team is visible to you")
        raise AssertionError  # unreachable: refuse raises
    check_team(ctx, team)
    by = ("team", "model") if state.model else ("team",)
    bill = data.bill(state.period, by)
    line = bill_line(bill, team, state.model)
    previous = None
    prev = str(Period.exact(state.period).shift(-1))
    if prev in data.periods():
        previous = bill_line(data.bill(prev, by), team, state.model)
    daily, by_model_mode = data.memo(
        ("team", state.period, team, state.model),
        lambda: _charts(_team_detail(data.bill(state.period), team, state.model)),
    )
    top = data.memo(("team_idle", state.period, team, state.model), lambda: idle_top(
        data.held_allocations(state.period), data.workloads(), data.recommendations(state.period), team,
        model=state.model, currency=ctx.currency))
    queues, summary = team_queues(ctx, team)
    state_row, cumulative = budget_view(ctx, team)
    return TeamView(
        team=team, period=state.period, model=state.model, currency=ctx.currency, line=line,
        previous=previous, budget=ctx.settings.teams.budgets.get(team), daily=daily,
        by_model_mode=by_model_mode, idle_top=top, queues=queues, queue_summary=summary,
        tokens=token_costs(ctx, team), download_href=download_href(state.period, team, state.model),
        by_priority_class=team_priority.by_priority_class(data, state.period, team),
        preemption=team_priority.preemption_losses(data, state.period, team),
        budget_state=state_row, cumulative=cumulative,
        empty_note=None if bill.fleet_card_hours else where_data(ctx),
        results_note=results_note(ctx, (RECOMMENDATIONS, TOKEN_COSTS)),
        bill_notes=tuple(data.bill_notes(state.period)),
    )


def budget_view(ctx: PageContext, team: str) -> tuple[dict[str, Any] | None, pl.DataFrame]:
    """The team's budget status (the month's whole bill, not a model's part) and its running cost."""
    from gpuledger.analytics.billing.budgets import budget_status, cumulative_daily

    period = ctx.state.period

    def compute() -> tuple[dict[str, Any] | None, pl.DataFrame]:
        bill = ctx.data.bill(period)
        rows = budget_status(bill, ctx.settings, [team]).to_dicts()
        return (rows[0] if rows else None), cumulative_daily(_team_detail(bill, team, None))

    return ctx.data.memo(("team_budget", period, team), compute)


def download_href(period: str, team: str, model: str | None) -> str:
    from urllib.parse import urlencode

    params = {"period": period, "team": team, **({"model": model} if model else {})}
    return "/download/bill.csv?" + urlencode(params)


def team_queues(ctx: PageContext, team: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Hourly Kueue series and a summary for the ClusterQueues the team submits to."""
    mapping = ctx.data.queue_teams()
    mine = sorted(cq for cq, teams in mapping.items() if team in teams)
    series = ctx.data.queue_series(ctx.state.period).filter(pl.col("cluster_queue").is_in(mine))
    return series, queue_summary(series)


def queue_summary(series: pl.DataFrame) -> pl.DataFrame:
    """Per ClusterQueue: nominal quota, mean and peak use, quota use, borrowing, pending, wait."""
    if series.is_empty():
        return pl.DataFrame()
    return (
        series.group_by("cluster_queue")
        .agg(
            pl.col("nominal_quota").mean().alias("nominal_quota"),
            pl.col("usage").mean().alias("usage_mean"),
            pl.col("usage_max").max().alias("usage_max"),
            pl.col("borrowed").mean().alias("borrowed_mean"),
            pl.col("pending_workloads").mean().alias("pending_mean"),
            (pl.col("admission_wait_s").mean() / 60).alias("wait_min_mean"),
            (pl.col("admission_wait_s").quantile(0.95) / 60).alias("wait_min_p95"),
        )
        .with_columns(
            pl.when(pl.col("nominal_quota") > 0)
            .then(pl.col("usage_mean") / pl.col("nominal_quota"))
            .otherwise(None)
            .alias("quota_use")
        )
        .sort("cluster_queue")
    )


def token_costs(ctx: PageContext, team: str) -> pl.DataFrame:
    tokens = ctx.data.token_costs(ctx.state.period)
    return tokens.filter(pl.col("team") == team).drop("team")


# Rendering -------------------------------------------------------------------------------------
def _kpis(v: TeamView) -> html.Div:
    cur, line, prev = v.currency, v.line, v.previous
    budget_sub = ""
    b = v.budget_state
    if v.budget and b is not None and not v.model:
        left = f"{money(b['left'], cur)} left" if b["left"] >= 0 else f"{money(-b['left'], cur)} over"
        budget_sub = (f"{percent(b['used_ratio'])} used · {left} · "
                      f"month-end forecast {money(b['forecast'], cur)} ({percent(b['forecast_ratio'])})")
    elif v.budget:
        budget_sub = f"{percent(line['cost'] / v.budget)} of {money(v.budget, cur)} budget"
    idle_share = line["idle_cost"] / line["cost"] if line["cost"] else None
    return html.Div(
        [
            kpi("Cost", money(line["cost"], cur), _vs(line["cost"], prev, "cost"), id="kpi-cost",
                raw=line["cost"]),
            kpi("Budget", money(v.budget, cur) if v.budget else "no budget set", budget_sub,
                id="kpi-budget", raw=v.budget),
            kpi("GPU-hours", number(line["card_hours"]), _vs(line["card_hours"], prev, "card_hours"),
                id="kpi-card-hours", raw=line["card_hours"]),
            kpi("Idle cost", money(line["idle_cost"], cur),
                f"{percent(idle_share)} of cost · {number(line['idle_card_hours'])} idle GPU-hours",
                id="kpi-idle-cost", raw=line["idle_cost"]),
        ],
        className="kpis",
    )


def _idle_table(v: TeamView) -> html.Div:
    cur = v.currency
    return table(
        v.idle_top,
        [("namespace", "namespace"), ("holder", "workload"), ("model", "GPU model"),
         ("idle_card_hours", "idle GPU-hours"),
         ("idle_cost", f"idle cost ({cur})"), ("recommendation", "recommendation")],
        id="idle-table",
        formats={"idle_card_hours": number, "idle_cost": lambda x: money(x, cur)},
    )


def _queue_table(v: TeamView) -> html.Div:
    return table(
        v.queue_summary,
        [("cluster_queue", "ClusterQueue"), ("nominal_quota", "nominal GPUs"), ("usage_mean", "mean use"),
         ("quota_use", "quota use"), ("borrowed_mean", "borrowed"), ("pending_mean", "pending"),
         ("wait_min_mean", "wait (min)"), ("wait_min_p95", "p95 wait (min)")],
        id="team-queue-table",
        formats={"quota_use": percent, "wait_min_mean": number,
                 "wait_min_p95": number},
    )


def _token_table(v: TeamView) -> html.Div:
    cur = v.currency
    return table(
        v.tokens,
        [("model_name", "model service"), ("pods", "pods"), ("prompt_tokens", "prompt tokens"),
         ("generation_tokens", "generated tokens"), ("gpu_cost", f"GPU cost ({cur})"),
         ("cost_per_m_prompt", "per M prompt"), ("cost_per_m_generated", "per M generated"),
         ("cost_per_m_tokens", "per M tokens")],
        id="token-table",
        formats={
            "prompt_tokens": lambda x: f"{x:,.0f}", "generation_tokens": lambda x: f"{x:,.0f}",
            **{c: (lambda x: money(x, cur)) for c in
               ("gpu_cost", "cost_per_m_prompt", "cost_per_m_generated", "cost_per_m_tokens")},
        },
    )


def render(v: TeamView) -> html.Div:
    cur = v.currency
    scope = f"{v.team} · {v.period}" + (f" · {v.model}" if v.model else "")
    return html.Div(
        [
            graph(_daily_figure(v, scope), "team-daily"),
            *([html.P(v.empty_note, className="empty", id="empty-period")] if v.empty_note else []),
            *bill_banner(v.bill_notes, "team-bill-notes"),
            *rules_warning(v.results_note, "team-results-rules"),
            _kpis(v),
            html.Div(
                [
                    section("Where the money went", graph(figures.cost_by_model_mode(v.by_model_mode, cur),
                                                          "team-by-model")),
                    section("Top idle workloads", _idle_table(v)),
                ],
                className="grid2",
            ),
            section(
                "Queue waits and quota use",
                graph(figures.queue_panels(v.queues, "Team queues"), "team-queues"), _queue_table(v),
            ),
            section("Token cost per model service", _token_table(v)),
            team_priority.render(v.by_priority_class, v.preemption, cur),
            html.A(f"Download {v.team}'s bill for {v.period} (CSV)", href=v.download_href,
                   id="download-bill", className="button"),
        ],
        id="team-page",
    )


def _daily_figure(v: TeamView, scope: str) -> Any:
    from gpuledger.dashboards.figures_teams import with_budget_line

    figure = figures.daily_cost(v.daily, v.currency, f"Daily cost · {scope}")
    if v.model or v.cumulative is None:
        return figure
    return with_budget_line(figure, v.cumulative, v.budget, v.currency)


def show(ctx: PageContext) -> html.Div:
    """The page for the registry (`dashboards.registry`)."""
    return pending.append_panel(ctx, render(v := view(ctx)), v.team)  # issue 35's Pending panel


def _vs(now: float, prev: dict[str, float] | None, key: str) -> str:
    from gpuledger.dashboards.pages.common import change

    return change(now, prev[key] if prev else None)
