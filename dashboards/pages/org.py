"""The lake-mode pages (`gpuledger serve --lake`): Teams by cluster and the Fleet by cluster.

Both read only the org bill (`dashboards.lake_data.OrgData`): each cluster's lines are the ones
it published, to the cent, so a cluster's rows add up to its fleet cost and the clusters to the
org total. Roles are the cluster pages' (`dashboards.access`): Teams for every role, a lead
seeing only the rows of the teams they lead (in every cluster) and no totals; the Fleet by
cluster for admins and viewers, with each cluster's rules (its manifest's fingerprint) and a
warning when they differ (docs/decisions/0150). The pages that need a warehouse (a team's detail, the Fleet
heatmap, queues, plans) answer that they are not available in lake mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
from dash import html

from gpuledger.analytics.billing.org_bill import OrgBill
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.core.access import Principal
from gpuledger.core.errors import InputError
from gpuledger.core.registry import Registry
from gpuledger.core.rules_record import NOT_RECORDED, RecordedRules
from gpuledger.dashboards.access import EVERY_ROLE, FLEET_ROLES
from gpuledger.dashboards.lake_data import OrgData
from gpuledger.dashboards.pages.common import Page, money, number, percent, refuse, section


@dataclass(frozen=True)
class LakeContext:
    """Who asks, which month and cluster (None: all), and the lake's data (one per request)."""

    principal: Principal
    period: str
    cluster: str | None
    data: OrgData

    @property
    def fleet(self) -> bool:
        return self.principal.admin or self.principal.viewer


LakePage = Page[LakeContext]
"""A lake page: the dashboard's one `Page` rule over the lake's context."""


# Teams by cluster --------------------------------------------------------------------------------
def team_rows(ctx: LakeContext) -> pl.DataFrame:
    """The org bill by (cluster, team) the principal may see, in the selected cluster."""
    lines = ctx.data.org_bill(ctx.period, ("cluster", "team")).lines
    if ctx.cluster:
        lines = lines.filter(pl.col("cluster") == ctx.cluster)
    if not ctx.fleet:
        if not ctx.principal.lead_of:
            refuse(ctx.principal, "the teams overview")
        lines = lines.filter(pl.col("team").is_in(sorted(ctx.principal.lead_of)))
    return lines.with_columns(pl.col("team").is_in(list(SPECIAL_LINES)).alias("special"))


def _attrs(**values: str) -> dict[str, Any]:
    """`data-*` attributes for a Dash component (Dash's stubs do not know them): `data_x` →
    `data-x`."""
    return {k.replace("_", "-"): v for k, v in values.items()}


def _num(value: float, text: str, col: str) -> html.Td:
    return html.Td(text, className="num", **_attrs(data_value=repr(float(value)), data_col=col))


def _subtotal(cluster: str, rows: pl.DataFrame, currency: str, fleet_cost: float) -> html.Tr:
    total = float(rows["cost"].sum())
    return html.Tr(
        [html.Td(f"{cluster} total (its fleet cost {money(fleet_cost, currency)})", colSpan=2),
         _num(float(rows["card_hours"].sum()), number(float(rows["card_hours"].sum())), "card_hours"),
         _num(float(rows["idle_cost"].sum()), money(float(rows["idle_cost"].sum()), currency), "idle_cost"),
         _num(total, money(total, currency), "cost")],
        className="subtotal", **_attrs(data_cluster=cluster, data_fleet=repr(fleet_cost)),
    )


def show_teams(ctx: LakeContext) -> html.Div:
    bill = ctx.data.org_bill(ctx.period, ("cluster", "team"))
    rows, cur = team_rows(ctx), bill.currency
    head = html.Thead(html.Tr([html.Th(h) for h in ("cluster", "team", "GPU-hours", "idle cost", "cost")]))
    body: list[Any] = []
    for cluster in sorted(set(rows["cluster"].to_list())):
        mine = rows.filter(pl.col("cluster") == cluster).sort(["special", "cost"], descending=[False, True])
        body += [
            html.Tr([html.Td(cluster), html.Td(r["team"]),
                     _num(r["card_hours"], number(r["card_hours"]), "card_hours"),
                     _num(r["idle_cost"], money(r["idle_cost"], cur), "idle_cost"),
                     _num(r["cost"], money(r["cost"], cur), "cost")],
                    className="special" if r["special"] else "team-row",
                    **_attrs(data_cluster=cluster, data_team=r["team"]))
            for r in mine.iter_rows(named=True)
        ]
        if ctx.fleet:
            body.append(_subtotal(cluster, mine, cur, bill.clusters[cluster]))
    foot: list[Any] = []
    if ctx.fleet and not ctx.cluster:
        total = float(rows["cost"].sum())
        cell = html.Td(money(total, cur), className="num", id="org-total",
                       **_attrs(data_value=repr(total), data_fleet=repr(bill.fleet_cost)))
        foot = [html.Tfoot(html.Tr([html.Td("org total", colSpan=4), cell]))]
    table = html.Table([head, html.Tbody(body), *foot], className="table", id="org-teams-table")
    where = ctx.cluster or f"all {len(bill.clusters)} clusters"
    return html.Div([section(f"Teams by cluster · {ctx.period} · {where}", table)], id="org-teams-page")


# Fleet by cluster --------------------------------------------------------------------------------
def cluster_summary(bill: OrgBill) -> list[dict[str, Any]]:
    """Per cluster: fleet cost (as published), GPU-hours, idle share and cost, teams billed."""
    out = []
    for name, fleet_cost in sorted(bill.clusters.items()):
        mine = bill.lines.filter(pl.col("cluster") == name)
        hours = float(mine["card_hours"].sum())
        idle = float(mine["idle_card_hours"].sum())
        out.append({"cluster": name, "fleet_cost": fleet_cost, "card_hours": hours,
                    "idle_share": idle / hours if hours else None,
                    "idle_cost": float(mine["idle_cost"].sum()),
                    "teams": mine.filter(~pl.col("team").is_in(list(SPECIAL_LINES))).height,
                    "watermark": bill.watermarks.get(name) or "–",
                    "rules": _rules_cell(bill.rules.get(name))})
    return out


def _rules_cell(rules: RecordedRules | None) -> str:
    """A cluster's rules as its manifest records them (docs/decisions/0150)."""
    return rules.fingerprint if rules is not None else NOT_RECORDED


def show_fleet(ctx: LakeContext) -> html.Div:
    bill = ctx.data.org_bill(ctx.period, ("cluster", "team"))
    cur = bill.currency
    rows = [r for r in cluster_summary(bill) if not ctx.cluster or r["cluster"] == ctx.cluster]
    head = html.Thead(html.Tr([html.Th(h) for h in (
        "cluster", "teams", "GPU-hours", "idle %", "idle cost", "fleet cost", "data as of", "rules")]))
    body = [
        html.Tr([html.Td(r["cluster"]), html.Td(str(r["teams"]), className="num"),
                 _num(r["card_hours"], number(r["card_hours"]), "card_hours"),
                 html.Td(percent(r["idle_share"]), className="num"),
                 _num(r["idle_cost"], money(r["idle_cost"], cur), "idle_cost"),
                 _num(r["fleet_cost"], money(r["fleet_cost"], cur), "fleet_cost"), html.Td(r["watermark"]),
                 html.Td(r["rules"], **_attrs(data_col="rules"))],
                **_attrs(data_cluster=r["cluster"]))
        for r in rows
    ]
    total = sum(r["fleet_cost"] for r in rows)
    foot = html.Tfoot(html.Tr([html.Td("total", colSpan=5),
                               html.Td(money(total, cur), className="num", id="org-fleet-total",
                                       **_attrs(data_value=repr(total))), html.Td(""), html.Td("")]))
    table = html.Table([head, html.Tbody(body), foot], className="table", id="org-fleet-table")
    note = bill.rules_note()
    warning = [html.P(note, className="warning", id="org-rules-differ")] if note else []
    return html.Div([section(f"Fleet by cluster · {ctx.period}", *warning, table)], id="org-fleet-page")


def not_in_lake_mode(what: str) -> Callable[[LakeContext], html.Div]:
    """A page that needs a cluster's warehouse: say so instead of showing nothing."""

    def render(_ctx: LakeContext) -> html.Div:
        return html.Div([html.H2(f"{what}: not available in lake mode"),
                         html.P("This dashboard reads the org lake (published bills only). "
                                f"{what} needs a cluster's warehouse: open that cluster's dashboard.")],
                        className="unavailable", id="lake-unavailable")

    return render


LAKE_PAGES: Registry[LakePage] = Registry("lake page", error=InputError, key=lambda page: page.path)
"""In navigation order; `/` and unknown paths land on Teams."""
LAKE_PAGES.add(LakePage("/teams", "Teams", EVERY_ROLE, show_teams, what="the teams overview"))
LAKE_PAGES.add(LakePage("/org", "Fleet by cluster", FLEET_ROLES, show_fleet, what="the fleet by cluster"))
LAKE_PAGES.add(LakePage("/team", "My team", EVERY_ROLE, not_in_lake_mode("A team's page"),
                        what="any team's page"))
LAKE_PAGES.add(LakePage("/fleet", "Fleet", FLEET_ROLES, not_in_lake_mode("The fleet heatmap"),
                        what="the fleet page"))
LAKE_PAGES.add(LakePage("/queues", "Queues", EVERY_ROLE, not_in_lake_mode("Queues"), what="queues"))
LAKE_PAGES.add(LakePage("/plans", "Plans", FLEET_ROLES, not_in_lake_mode("Plans"), what="plans"))


def lake_page_for(pathname: str | None) -> LakePage:
    path = (pathname or "/").rstrip("/") or "/"
    return LAKE_PAGES.get(path) if path in LAKE_PAGES else LAKE_PAGES.get("/teams")
