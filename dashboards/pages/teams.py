"""Teams: every team at once — who spends, who wastes, who could save, against budget.

The page answers "which team spends and wastes most?" without stepping through the Team
dropdown. Its rows are `analytics.billing.overview.teams_overview` of the month's bill (so each
team's cost is its bill line to the cent and the total is the fleet cost); the chart stacks the
bill's detail per day and team. Admins and viewers (finance) see every row and the special
lines; a lead sees only the rows of the teams they lead, and no fleet total (the CSV route
applies the same rule, on the server). Columns sort in the browser (`assets/sortable.js`):
each cell carries its unrounded value in `data-value`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import polars as pl
from dash import dcc, html

from gpuledger.core.period import Period
from gpuledger.dashboards.figures_teams import daily_by_team
from gpuledger.dashboards.pages.common import (
    PageContext,
    bill_banner,
    graph,
    money,
    number,
    percent,
    refuse,
    results_note,
    rules_warning,
    section,
    where_data,
)
from gpuledger.dashboards.serving_results import RECOMMENDATIONS


@dataclass(frozen=True)
class TeamsView:
    period: str
    currency: str
    rows: pl.DataFrame
    """`teams_overview` rows the principal may see."""
    daily: pl.DataFrame
    fleet_cost: float | None
    """None for a lead: the fleet total is not theirs to see."""
    download_href: str
    empty_note: str | None
    results_note: str | None = None
    """Set when the stored recommendations behind the savings carry other rules than the server's."""
    bill_notes: tuple[str, ...] = ()
    """The month's bill's notes (`ReadModel.bill_notes`), shown above the numbers."""
    saving_missing: str | None = None
    """Why there is no saving figure (the recommendations are not computed yet, and how to
    compute them); None when the savings are known (a team without any is a real 0)."""
    lead_view: bool = False
    """The principal leads teams and sees no fleet: the headline speaks of their teams."""


def overview(ctx: PageContext, period: str) -> pl.DataFrame:
    """The month's overview (cached per snapshot; access is checked by the caller)."""
    from gpuledger.analytics.billing.overview import teams_overview

    data = ctx.data

    def compute() -> pl.DataFrame:
        prev = str(Period.exact(period).shift(-1))
        previous = data.bill(prev) if prev in data.periods() else None
        return teams_overview(data.bill(period), ctx.settings, previous=previous,
                              recommendations=data.recommendations(period))

    return data.memo(("teams_overview", period), compute)


def visible_rows(ctx: PageContext, frame: pl.DataFrame) -> pl.DataFrame:
    """All rows for admins and viewers; only their own teams' rows for a lead."""
    p = ctx.principal
    if p.admin or p.viewer:
        return frame
    if not p.lead_of:
        refuse(p, "the teams overview")
    return frame.filter(pl.col("team").is_in(sorted(p.lead_of)) & ~pl.col("special"))


def view(ctx: PageContext) -> TeamsView:
    period = ctx.state.period
    rows = visible_rows(ctx, overview(ctx, period))
    fleet = ctx.principal.admin or ctx.principal.viewer
    bill = ctx.data.bill(period)
    detail = bill.detail if fleet else bill.detail.filter(pl.col("team").is_in(rows["team"].to_list()))
    daily = ctx.data.memo(("teams_daily", period, tuple(rows["team"].to_list())),
                          lambda: detail.group_by("day", "team").agg(pl.col("cost").sum()).sort("day"))
    has_usage = bool(bill.fleet_card_hours)
    missing = ctx.data.missing(RECOMMENDATIONS, period)
    if missing:  # unknown is never zero: no saving on any row
        rows = rows.with_columns(pl.lit(None, dtype=pl.Float64).alias("saving"))
    return TeamsView(
        period=period, currency=ctx.currency, rows=rows, daily=daily,
        fleet_cost=bill.fleet_cost if fleet else None,
        download_href="/download/teams.csv?" + urlencode({"period": period}),
        empty_note=None if has_usage else where_data(ctx),
        results_note=results_note(ctx, (RECOMMENDATIONS,)),
        bill_notes=tuple(ctx.data.bill_notes(period)),
        saving_missing=missing, lead_view=not fleet,
    )


# Rendering -------------------------------------------------------------------------------------
COLUMNS: tuple[tuple[str, str], ...] = (
    ("team", "team"), ("cost", "cost"), ("change", "vs last month"), ("card_hours", "GPU-hours"),
    ("idle_cost", "idle cost"), ("idle_share", "idle %"), ("activity", "mean GPU activity"),
    ("budget_used", "budget used"), ("forecast", "month-end forecast"),
    ("saving", "potential saving / month"),
)


MONEY = ("cost", "previous_cost", "idle_cost", "budget", "forecast", "saving")
"""The overview's money columns: the CSV writes them at the currency's decimals (`core.money`)."""


def _formats(currency: str) -> dict[str, Callable[[Any], str]]:
    def cash(x: Any) -> str:
        return money(x, currency)

    def signed(x: Any) -> str:
        return "–" if x is None else f"{'+' if x >= 0 else ''}{x * 100:.1f}%"

    return {"cost": cash, "idle_cost": cash, "forecast": cash, "saving": cash, "card_hours": number,
            "change": signed, "idle_share": percent, "activity": percent, "budget_used": percent}


def team_href(period: str, team: str, special: bool) -> str:
    if special:
        return "/fleet?" + urlencode({"period": period})
    return "/team?" + urlencode({"period": period, "team": team})


def _attrs(values: dict[str, str]) -> dict[str, Any]:
    """`data-*` attributes for a Dash component (typed loosely: Dash's stubs do not know them)."""
    return values


def _cell(col: str, row: dict[str, Any], fmt: dict[str, Callable[[Any], str]], period: str) -> html.Td:
    value = row.get(col)
    if col == "team":
        link = dcc.Link(str(value), href=team_href(period, str(value), bool(row["special"])))
        return html.Td(link, **_attrs({"data-value": str(value)}))
    raw = "" if value is None else repr(float(value))
    if col == "saving" and value is None and not row["special"]:
        return html.Td("not computed", className="num unknown", **_attrs({"data-value": "", "data-col": col}))
    over = col in ("budget_used", "forecast") and _over_budget(row)
    marks = {"title": "over budget"} if over else {}
    return html.Td(fmt[col](value), className="num over-budget" if over else "num",
                   style=OVER_STYLE if over else None,
                   **_attrs({"data-value": raw, "data-col": col, **marks}))


OVER_STYLE = {"color": "#b91c1c", "fontWeight": "bold", "background": "#fee2e2"}
"""An over-budget team's budget cells (issue 32: 110.8% read like any other number)."""


def _over_budget(row: dict[str, Any]) -> bool:
    """Spent past the budget, or forecast to (`budget_used` and the forecast are against it)."""
    used, budget, forecast = row.get("budget_used"), row.get("budget"), row.get("forecast")
    return bool((used is not None and used > 1) or (budget and forecast is not None and forecast > budget))


def teams_table(v: TeamsView) -> html.Div:
    if v.rows.is_empty():
        return html.Div("no team is billed in this period", className="empty", id="teams-table")
    fmt = _formats(v.currency)
    head = html.Thead(html.Tr([
        html.Th(h, **_attrs({"data-sort": c, "title": "click to sort"})) for c, h in COLUMNS
    ]))
    body = [
        html.Tr([_cell(c, row, fmt, v.period) for c, _ in COLUMNS],
                className="special" if row["special"] else f"team-row{' over' if _over_budget(row) else ''}",
                **_attrs({"data-team": row["team"]}))
        for row in v.rows.iter_rows(named=True)
    ]
    foot = []
    if v.fleet_cost is not None:
        total = float(v.rows["cost"].sum())
        foot = [html.Tfoot(html.Tr([
            html.Td("total (fleet cost)"),
            html.Td(money(total, v.currency), className="num", id="teams-total",
                    **_attrs({"data-value": repr(total), "data-fleet": repr(float(v.fleet_cost))})),
            *[html.Td("") for _ in COLUMNS[2:]],
        ]))]
    return html.Div(html.Table([head, html.Tbody(body), *foot], className="table sortable"), id="teams-table")


def _headline(v: TeamsView) -> Any:
    """Who spends and wastes most, and what acting on the recommendations saves: the sum of
    every row's saving, special lines included (`unattributed` workloads have recommendations
    too), so it is the figure `gpuledger recommend` and `/api/v1/recommendations` give (issue 32:
    the headline once left them out). A lead with one team reads about that team, not a ranking."""
    teams = v.rows.filter(~pl.col("special"))
    if teams.is_empty():
        return html.Div()
    top = teams.sort("cost", descending=True).row(0, named=True)
    waste = teams.sort("idle_cost", descending=True).row(0, named=True)
    if v.saving_missing:
        act: list[Any] = [html.Span(f"savings: {v.saving_missing}", className="unknown", id="teams-saving")]
    else:
        saving = float(v.rows["saving"].fill_null(0).sum())
        act = ["acting on the recommendations would save ",
               html.Span(money(saving, v.currency), id="teams-saving",
                         **_attrs({"data-value": repr(saving)})),
               " per month."]
    if teams.height == 1:
        who: list[Any] = [html.B(top["team"]), f" spent {money(top['cost'], v.currency)}, of which "
                          f"{money(top['idle_cost'], v.currency)} idle; "]
    else:
        ranking = "of your teams, " if v.lead_view else ""
        who = [ranking, html.B(top["team"]), f" spends most ({money(top['cost'], v.currency)}); ",
               html.B(waste["team"]), f" wastes most ({money(waste['idle_cost'], v.currency)} idle); "]
    return html.P([*who, *act], id="teams-headline", className="headline")


def render(v: TeamsView) -> html.Div:
    if v.empty_note:
        return html.Div([html.P(v.empty_note, className="empty", id="empty-period")], id="teams-page")
    return html.Div(
        [
            graph(daily_by_team(v.daily, v.currency, f"Daily cost by team · {v.period}"), "teams-daily"),
            _headline(v),
            *bill_banner(v.bill_notes, "teams-bill-notes"),
            *rules_warning(v.results_note, "teams-results-rules"),
            section("Teams", teams_table(v),
                    html.A(f"Download the teams overview for {v.period} (CSV)", href=v.download_href,
                           id="download-teams", className="button")),
        ],
        id="teams-page",
    )


def show(ctx: PageContext) -> html.Div:
    """The page for the registry (`dashboards.registry`)."""
    return render(view(ctx))


def overview_csv(ctx: PageContext) -> str:
    """The rows the page shows, as CSV with currency and period columns (the download)."""
    from gpuledger.core.money import fixed_columns

    rows = visible_rows(ctx, overview(ctx, ctx.state.period))
    return fixed_columns(rows.with_columns(
        pl.lit(ctx.state.period).alias("period"), pl.lit(ctx.currency).alias("currency")
    ).select("period", "currency", *rows.columns), MONEY, ctx.currency).write_csv()
