"""What every page uses: the request context, number formats, tables, KPI cards, refusals.

Pages are split in two halves so the logic is testable without a browser: `view(ctx)` is a
plain function returning a dataclass of numbers and small frames (access checked there, on the
server), and `render(view)` turns it into Dash components.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import polars as pl
from dash import dcc, html

from gpuledger.core.access import Principal
from gpuledger.core.config import Settings
from gpuledger.core.errors import AccessDeniedError
from gpuledger.dashboards.access import has_role
from gpuledger.dashboards.readmodel import ReadModel
from gpuledger.dashboards.state import ViewState

if TYPE_CHECKING:
    from gpuledger.dashboards.actions import PlanActions

CURRENCY_SIGNS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


@dataclass(frozen=True)
class PageContext:
    """Who asks, what they look at, and where the data comes from (one per request)."""

    principal: Principal
    state: ViewState
    data: ReadModel
    settings: Settings
    actions: PlanActions | None = None
    """The Plans page's buttons (None where a page is rendered without them, e.g. in tests)."""

    @property
    def currency(self) -> str:
        return self.settings.currency


def money(value: float | None, currency: str) -> str:
    """`$12,345.67` (or `12,345.67 CHF` for currencies without a sign), at the currency's own
    decimals (`core.money.decimals`, the CLDR's: `¥12,346`, `1.235 BHD`), as the CSVs and the
    grid write it (docs/decisions/0197)."""
    from gpuledger.core.money import decimals

    if value is None:
        return "–"
    places = decimals(currency)
    amount = round(float(value), places) + 0.0  # + 0.0: no "-0.00"
    sign = CURRENCY_SIGNS.get(currency)
    text = f"{abs(amount):,.{places}f}"
    minus = "-" if amount < 0 else ""
    return f"{minus}{sign}{text}" if sign else f"{minus}{text} {currency}"


def number(value: float | None, digits: int = 1) -> str:
    """A quantity with `digits` decimals; a count (an int) whole, without any (`3`, not `3.0`)."""
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{float(value):,.{digits}f}"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def change(now: float, before: float | None) -> str:
    """`+12.3% vs last month` (or `new` when there was nothing before)."""
    if before is None or abs(before) < 1e-9:
        return "no data last month" if now else ""
    delta = (now - before) / abs(before)
    return f"{'+' if delta >= 0 else ''}{delta * 100:.1f}% vs last month"


def results_note(ctx: PageContext, names: Sequence[str]) -> str | None:
    """The first of the stored month results `names` (of the page's month) computed under other
    rules than the server's says so (docs/decisions/0150); None when all are current."""
    for name in names:
        note = ctx.data.result_note(name, ctx.state.period)
        if note is not None:
            return f"{name.removeprefix('advice:').replace('_', ' ')}: {note}"
    return None


def rules_warning(note: str | None, id: str) -> list[html.P]:
    """The note as a warning paragraph (none when there is no note)."""
    return [html.P(note, className="warning", id=id)] if note else []


def bill_banner(notes: Sequence[str], id: str) -> list[html.Div]:
    """The month's bill's notes (`ReadModel.bill_notes`: billed from raw samples because the
    roll-up was computed under other rules, unpriced models, ...) as one warning above the
    numbers, a paragraph each: what `gpuledger bill` prints on stderr (docs/decisions/0158)."""
    if not notes:
        return []
    return [html.Div([html.P(line) for line in notes], className="warning", id=id)]


def refuse(principal: Principal, what: str) -> None:
    """Raise `AccessDeniedError` with a message that names the user and what they asked for."""
    raise AccessDeniedError(f"user {principal.user!r} may not see {what}")


def refusal(message: str) -> html.Div:
    return html.Div(
        [html.H2("Not allowed"), html.P(message)], className="refusal", id="refusal", role="alert"
    )


def rules_refusal(message: str, hint: str, *, serving_store: bool) -> html.Div:
    """The page of a month the bill refuses (`analytics.usage.plan.RulesRefusal`): its roll-up
    was computed under other rules than the server's and the raw samples to recompute it are not
    here. What to do differs by where the dashboard reads: a serving store keeps no raw samples of
    rolled-up hours, but its warehouse may still have them (`gpuledger rollup` there stores the
    server's rules and the next publish brings them here); a warehouse read directly has lost
    them (compacted), so only the settings they were computed under, or the CLI's
    `--as-computed`, show them (docs/decisions/0158)."""
    if serving_store:
        way = (f"The serving store this dashboard reads keeps no raw samples of those hours, but its "
               f"warehouse may: run `{hint}` against the warehouse to store them under the server's "
               "rules (the serving store is published again), or serve with the settings they were "
               "computed under.")
    else:
        way = ("Their raw samples are gone from the warehouse (compacted): serve with the settings they "
               "were computed under to show them.")
    cli = ("On the command line, `gpuledger bill --as-computed` (and `report monthly --as-computed`) "
           "bills them as they were computed, saying so.")
    return html.Div(
        [html.H2("This month was computed under other rules"), html.P(message, id="rules-refusal-message"),
         html.P(way), html.P(cli)],
        className="error", id="rules-refusal", role="alert",
    )


def kpi(label: str, value: str, sub: str = "", *, id: str, raw: float | None = None) -> html.Div:
    """A KPI card; `data-value` carries the unrounded number for scripts and tests."""
    attrs: dict[str, Any] = {"data-value": "" if raw is None else repr(float(raw))}
    return html.Div(
        [html.Div(label, className="kpi-label"), html.Div(value, className="kpi-value", id=id, **attrs),
         html.Div(sub, className="kpi-sub")],
        className="kpi",
    )


def section(title: str, *children: Any, id: str | None = None) -> html.Section:
    props: dict[str, Any] = {"className": "card"}
    if id:
        props["id"] = id
    return html.Section([html.H3(title), *children], **props)


def graph(figure: Any, id: str) -> dcc.Graph:
    return dcc.Graph(figure=figure, id=id, config={"displaylogo": False, "responsive": True})


Formatter = Callable[[Any], str]


def _default(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def table(
    frame: pl.DataFrame,
    columns: Sequence[tuple[str, str]],
    *,
    id: str,
    formats: dict[str, Formatter] | None = None,
    limit: int = 50,
    links: dict[str, Callable[[dict[str, Any]], str]] | None = None,
) -> html.Div:
    """An HTML table of `frame` with (column, header) pairs; at most `limit` rows."""
    formats = formats or {}
    links = links or {}
    if frame.is_empty():
        return html.Div("nothing to show", className="empty", id=id)
    head = html.Thead(html.Tr([html.Th(h) for _, h in columns]))
    rows = []
    for row in frame.head(limit).iter_rows(named=True):
        cells = []
        for col, _ in columns:
            text = formats.get(col, _default)(row.get(col))
            cell: Any = dcc.Link(text, href=links[col](row)) if col in links else text
            numeric = isinstance(row.get(col), int | float) and not isinstance(row.get(col), bool)
            cells.append(html.Td(cell, className="num" if numeric else None))
        rows.append(html.Tr(cells))
    more = (
        [html.Div(f"{frame.height - limit} more rows not shown", className="more")]
        if frame.height > limit else []
    )
    return html.Div([html.Table([head, html.Tbody(rows)], className="table"), *more], id=id)


def visible_team(ctx: PageContext, teams: list[str]) -> str | None:
    """The team the page shows: the URL's team, else `default_team`."""
    return ctx.state.team or default_team(ctx.principal, teams)


def default_team(principal: Principal, teams: list[str]) -> str | None:
    """The team a page shows when none is named: a lead's first own team, else the first the
    principal may see (the Team selector shows the same one)."""
    if principal.lead_of and not (principal.admin or principal.viewer):
        return sorted(principal.lead_of)[0]
    visible = principal.visible_teams(teams)
    return visible[0] if visible else None


def where_data(ctx: PageContext) -> str:
    """A sentence saying which months hold data (for a period without usage)."""
    periods = ctx.data.periods()
    span = f"{periods[-1]} to {periods[0]}" if len(periods) > 1 else periods[0]
    return f"No usage in {ctx.state.period}. Data exists for {span}."


def check_team(ctx: PageContext, team: str) -> None:
    if not ctx.principal.can_see_team(team):
        refuse(ctx.principal, f"team {team!r}'s data (leads see only the teams they lead)")


__all__ = ["AccessDeniedError", "PageContext"]


ROLE_NAMES = {"admin": "admins", "viewer": "viewers", "lead": "team leads"}


class _HasPrincipal(Protocol):
    @property
    def principal(self) -> Principal: ...


Ctx = TypeVar("Ctx", bound=_HasPrincipal)


@dataclass(frozen=True)
class Page(Generic[Ctx]):
    """One page: `render(ctx)` draws it for a principal holding one of `roles`; anyone else
    is told they "may not see `what`". Generic over its context, so the warehouse dashboard
    (`PageContext`) and the lake dashboard (`pages.org.LakeContext`) share one rule."""

    path: str
    title: str
    roles: frozenset[str]
    render: Callable[[Ctx], Any]
    what: str

    @property
    def nav_id(self) -> str:
        """The id of the page's navigation link (`nav-fleet` for `/fleet`)."""
        return f"nav-{self.path.strip('/')}"

    def allows(self, principal: Principal) -> bool:
        return has_role(principal, self.roles)

    def show(self, ctx: Ctx) -> Any:
        """The page, or `AccessDeniedError` when the principal holds none of its roles."""
        if not self.allows(ctx.principal):
            who = " and ".join(ROLE_NAMES[r] for r in ROLE_NAMES if r in self.roles)
            refuse(ctx.principal, f"{self.what} ({who} only)")
        return self.render(ctx)
