"""The frame around every page: navigation, filters, the data-freshness banner, and the
two-way sync between the URL and the filter controls.

The URL is the source of truth (see `dashboards.state`). `sync()` is one plain function for
both directions: a changed URL sets the controls; a changed control writes the URL. Dash runs
it as a single callback whose inputs and outputs overlap, which Dash allows for exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dash import dcc, html

from gpuledger.core.access import Principal
from gpuledger.core.config import utcnow
from gpuledger.dashboards.access import role_label
from gpuledger.dashboards.pages.freshness import Newest, newest_sample_of, stale_warning
from gpuledger.dashboards.readmodel import ReadModel
from gpuledger.dashboards.registry import PAGES, page_of
from gpuledger.dashboards.state import ViewState
from gpuledger.warehouse.snapshot_store import Snapshot, SnapshotStore

FILTER_IDS = ("f-period", "f-team", "f-model")
NAV_IDS = tuple(page.nav_id for page in PAGES)


def layout(refresh_s: float) -> html.Div:
    """The app layout; pages are drawn into `#page` by the render callback."""
    nav = [dcc.Link(page.title, href=page.path, id=page.nav_id, className="nav-link") for page in PAGES]
    filters = html.Div(
        [
            html.Label(["Period", dcc.Dropdown(id="f-period", clearable=False, searchable=False)]),
            html.Label(["Team", dcc.Dropdown(id="f-team", clearable=True, placeholder="choose a team")]),
            html.Label(["GPU model", dcc.Dropdown(id="f-model", clearable=True, placeholder="all models")]),
        ],
        className="filters",
    )
    return html.Div(
        [
            dcc.Location(id="url", refresh=False),
            dcc.Store(id="view"),
            dcc.Store(id="bump", data=0),
            dcc.Interval(id="tick", interval=int(max(refresh_s, 5) * 1000)),
            html.Header(
                [html.Div([html.Span("gpuledger", className="brand"), html.Nav(nav, className="nav")],
                          className="topline"),
                 filters, html.Div(id="whoami", className="whoami")],
                className="header",
            ),
            html.Div(id="banner", className="banner"),
            html.Div(id="flash", className="flash", role="status"),
            dcc.Loading(html.Main(id="page"), type="dot", delay_show=400),
        ],
        className="app",
    )


@dataclass(frozen=True)
class SyncResult:
    search: str
    state: ViewState
    page: str
    period_options: list[dict[str, str]]
    team_options: list[dict[str, str]]
    model_options: list[dict[str, str]]
    hrefs: list[str]

    @property
    def view(self) -> dict[str, Any]:
        return {"page": self.page, **self.state.to_dict()}


def _options(values: list[str]) -> list[dict[str, str]]:
    return [{"label": v, "value": v} for v in values]


def sync(
    data: ReadModel,
    principal: Principal,
    pathname: str | None,
    search: str | None,
    *,
    trigger: str | None,
    controls: tuple[str | None, str | None, str | None],
) -> SyncResult:
    """Reconcile URL and filter controls (see module docstring); returns both, consistent.

    Options offered to a lead are only their teams: that is a convenience; the pages enforce it.
    """
    periods = data.periods()
    page = page_of(pathname, principal)
    from_url = ViewState.from_query(search, periods[0])
    if trigger in FILTER_IDS:
        period, team, model = controls
        state = from_url.with_(period=period or from_url.period, team=team, model=model)
        if state.period != from_url.period:
            state = state.with_(node=None)
        state = ViewState.from_dict(state.to_dict(), periods[0])
    else:
        state = from_url
    try:
        teams = data.teams(state.period)
        models = data.models(state.period)
    except Exception:  # no bill for this period (e.g. analytics cannot price it): empty lists
        teams, models = [], []
    if page == "/team" and state.team is None:
        if teamless(principal):
            page = "/fleet"  # an admin's "My team" once opened the alphabetically first team
        else:
            from gpuledger.dashboards.pages.common import default_team

            # the Team selector shows the team on display, not an empty "choose a team"
            state = state.with_(team=default_team(principal, teams))
    visible = sorted(set(principal.visible_teams(teams)) | set(principal.lead_of))
    if state.team and state.team not in visible:
        # keep the URL's team selectable so the page can say "not yours" instead of silently
        # switching teams; the page itself refuses it on the server
        visible.append(state.team)
    period_options = _options(sorted(set(periods) | {state.period}, reverse=True))
    here = ViewState(state.period, state.team, state.model)
    to_fleet = state.team is None and teamless(principal)  # "My team" of an admin: the fleet
    hrefs = [here.href("/fleet" if p.path == "/team" and to_fleet else p.path) for p in PAGES]
    return SyncResult(
        state.to_query(), state, page, period_options, _options(visible), _options(models), hrefs
    )


def teamless(principal: Principal) -> bool:
    """A principal with no team of their own who sees the fleet (an admin, a viewer): their
    "My team" without a team chosen is the fleet view, not some team picked for them."""
    from gpuledger.dashboards.access import can_see_fleet

    return not principal.lead_of and can_see_fleet(principal)


def whoami(principal: Principal, dev_mode: bool) -> list[Any]:
    role = role_label(principal)
    text = f"{principal.user} · {role}" + (" · dev mode" if dev_mode else "")
    return [html.Span(text, id="whoami-text")]


def nav_visible(principal: Principal) -> list[dict[str, str]]:
    """Hide the links to pages the principal holds no role for (the pages refuse them anyway)."""
    hidden = {"display": "none"}
    return [{} if page.allows(principal) else hidden for page in PAGES]


def _freshness(found: Newest, now: datetime) -> list[Any]:
    """The newest sample time, and a warning when it is older than two collection intervals:
    the snapshot's copy time alone would make a dead collector look fresh. Simulated data (the
    demo) ends where the simulation ends and nothing collects more: no warning, it says so."""
    newest = found.sample
    if newest is None:
        return [html.Span("No samples in the warehouse yet.", id="stale-warning", className="warning")]
    if found.simulated:
        return [html.Span(f"Simulated data to {newest:%Y-%m-%d %H:%M:%S} UTC (newest sample; complete, "
                          "nothing collects more).", id="simulated-note")]
    return [f"Data as of {newest:%Y-%m-%d %H:%M:%S} UTC (newest sample).",
            *stale_warning(newest, now, "samples", "stale-warning")]


def banner(
    store: SnapshotStore, serving: Snapshot | None = None, *, data: ReadModel | None = None,
    now: datetime | None = None,
) -> list[Any] | str:
    """Where the numbers come from and how fresh they are (`serving`: the snapshot the pages
    show, which may be older than the newest while that one is being prepared). With `data`
    the banner states the newest sample time and warns when it is stale; the copy time says
    only how old the snapshot is, not the data in it."""
    snap = serving or store.snapshot
    if snap is None:
        if store.busy_since is not None:
            return f"Warehouse busy (a collector is writing); retrying every {store.refresh_s:g} s."
        return store.last_error or "No data yet."
    copied = f"snapshot taken {snap.taken_at:%Y-%m-%d %H:%M:%S} UTC"
    fresh = _freshness(newest_sample_of(data), now or utcnow()) if data is not None else []
    if store.busy_since is not None:
        return [*fresh, f" Warehouse busy since {store.busy_since:%H:%M:%S} UTC (a collector is "
                f"writing): showing the {copied}; retrying every {store.refresh_s:g} s."]
    return [*fresh, f" Showing the {copied}."] if fresh else f"Showing the {copied}."
