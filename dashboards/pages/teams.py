"""Teams: every team at once — who spends, who wastes, who could save, against budget.

The page answers "which team spends and wastes most?" without stepping through the Team
dropdown. Its rows are `analytics.billing.overview.teams_overview` of the month's bill (so each
team's cost is its bill line to the cent and the total is the fleet cost); the chart stacks the
bill's detail per day and team. Admins and viewers (finance) see every row and the special
lines; a lead sees only the rows of the teams they lead, and no fleet total (the CSV route
applies the same rule, on the server). The table is a data grid (`pages.grid`, AG Grid): sort,
filter and export in the browser, on the unrounded numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import polars as pl
from dash import html

from gpuledger.analytics.billing.special_lines import IDLE_UNDEFINED, SpecialLine
from gpuledger.core.period import Period
from gpuledger.dashboards.figures_teams import daily_by_team
from gpuledger.dashboards.pages.common import (
    PageContext,
    bill_banner,
    graph,
    money,
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


def team_href(period: str, team: str, special: bool) -> str:
    if special:
        return "/fleet?" + urlencode({"period": period})
    return "/team?" + urlencode({"period": period, "team": team})


def _attrs(values: dict[str, str]) -> dict[str, Any]:
    """`data-*` attributes for a Dash component (typed loosely: Dash's stubs do not know them)."""
    return values


def _over_budget(row: dict[str, Any]) -> bool:
    """Spent past the budget, or forecast to (`budget_used` and the forecast are against it)."""
    used, budget, forecast = row.get("budget_used"), row.get("budget"), row.get("forecast")
    return bool((used is not None and used > 1) or (budget and forecast is not None and forecast > budget))


def _d3(pattern: str, none: str = "'–'") -> dict[str, Any]:
    """A grid column's formatter: `d3.format(pattern)` of the value, `none` (a JavaScript
    expression) without one."""
    shown = f"params.value == null ? {none} : d3.format('{pattern}')(params.value)"
    return {"valueFormatter": {"function": shown}}


def _column_options(currency: str) -> dict[str, dict[str, Any]]:
    """How the Teams grid shows each column: a team links to its page; shares as percentages;
    an unknown saving of a team reads "not computed" (0195), a special line's "–"; an
    over-budget team's budget cells marked (issue 32: 110.8% read like any other number)."""
    from gpuledger.dashboards.pages.grid import money_formatter

    over = {"cellClassRules": {"over-budget": "params.data.over"}}
    saving = money_formatter(currency, unknown_js="(params.data.special ? '–' : 'not computed')")
    funding = f"({money_formatter(currency)['function']}) + (params.data.funding ? ' funding' : '')"
    return {
        "team": {"cellRenderer": "RowLink", "pinned": "left", "minWidth": 170},  # "sharing_discount" whole
        # the sharing discount is the platform's funding, not a charge: "$3,911.18 funding", the
        # word wrapping under the figure where the column is narrow
        "cost": {"valueFormatter": {"function": funding}, "wrapText": True, "autoHeight": True},
        "change": _d3("+.1%"), "card_hours": _d3(",.1f"), "idle_share": _d3(".1%"), "activity": _d3(".1%"),
        "budget_used": _d3(".1%") | over, "forecast": over,
        "saving": {"valueFormatter": saving,
                   "cellClassRules": {"unknown": "params.value == null && !params.data.special"}},
    }


def teams_table(v: TeamsView) -> html.Div:
    """The overview in the grid people sort and filter (`pages.grid`, as the advice): highest
    first on a header's first click; the special lines in grey; the fleet total under it."""
    from gpuledger.dashboards.pages.grid import grid

    if v.rows.is_empty():
        return html.Div("no team is billed in this period", className="empty", id="teams-table")
    funding = pl.col("team") == SpecialLine.SHARING_DISCOUNT.value
    frame = v.rows.with_columns(
        pl.Series("href", [team_href(v.period, str(r["team"]), bool(r["special"]))
                           for r in v.rows.iter_rows(named=True)], dtype=pl.String),
        pl.Series("over", [_over_budget(r) for r in v.rows.iter_rows(named=True)], dtype=pl.Boolean),
        funding.alias("funding"),
    ).with_columns(  # "–", not 0.0 or $0.00: the platform's funding holds no GPU-hours, and idle
        # is not defined where nothing was held (`IDLE_UNDEFINED`)
        pl.when(funding).then(None).otherwise(pl.col("card_hours")).alias("card_hours"),
        *(pl.when(pl.col("team").is_in(IDLE_UNDEFINED)).then(None).otherwise(pl.col(c)).alias(c)
          for c in ("idle_cost", "idle_share")))
    table = grid(frame, COLUMNS, id="teams-table", money_columns=MONEY, currency=v.currency,
                 file_name=f"teams-{v.period}.csv", column_options=_column_options(v.currency),
                 carry=("href", "special", "over", "funding"),
                 grid_options={"rowClassRules": {"special": "params.data.special"}}, highest_first=True)
    if v.fleet_cost is None:
        return table
    total = float(v.rows["cost"].sum())
    cell = html.Span(money(total, v.currency), id="teams-total",
                     **_attrs({"data-value": repr(total), "data-fleet": repr(float(v.fleet_cost))}))
    return html.Div([table, html.P(["total (fleet cost): ", cell], className="grid-total")])


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
