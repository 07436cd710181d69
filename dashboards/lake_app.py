"""The dashboard in lake mode (`gpuledger serve --lake URI`): the org's Teams and Fleet pages by
cluster, read-only, from the org lake, with no warehouse behind it.

Why its own small app and not `create_app` with a flag: that app is built around a warehouse
snapshot (the refresher, warm-ups, plan buttons, the freshness banner, the CSV and API routes);
in lake mode none of it exists. What both share is kept shared: the request limits and the
authentication hook (`dashboards.app`, the same roles from `access`), the served-in-a-thread
and gunicorn paths (`start_server`, `dashboards.server`), the page look (`assets`). The pages
(`dashboards.pages.org`) read `dashboards.lake_data.OrgData` only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flask
from dash import Dash, Input, Output, dcc, html

from gpuledger.core.access import Principal
from gpuledger.core.config import Settings
from gpuledger.core.errors import AccessDeniedError, GpuledgerError
from gpuledger.core.signing import signing_key
from gpuledger.dashboards.access import AccessPolicy, role_label
from gpuledger.dashboards.http_guards import ASSETS, install_auth, install_limits, preload
from gpuledger.dashboards.lake_data import LakeReadModel
from gpuledger.dashboards.pages.common import refusal
from gpuledger.dashboards.pages.org import LAKE_PAGES, LakeContext, lake_page_for
from gpuledger.warehouse.lake.location import Lake


@dataclass
class LakeDashboard:
    """One lake-mode dashboard (a `dashboards.wiring.Servable`)."""

    dash: Dash
    data: LakeReadModel
    policy: AccessPolicy
    settings: Settings

    @property
    def server(self) -> flask.Flask:
        return self.dash.server

    def close(self) -> None:
        self.data.close()


def _principal() -> Principal:
    principal = flask.g.get("principal")
    if principal is None:  # the hook answers 401 before any callback runs
        raise AccessDeniedError("no authenticated user for this request")
    return principal


def layout(app: LakeDashboard) -> html.Div:
    """Drawn per page load (new months and clusters appear without a restart); links to pages
    the principal holds no role for are hidden (the pages refuse them on the server anyway).
    Dash also draws it once to validate it, before the authentication hook of the first
    request has run: then there is no principal, and nothing is hidden or named."""
    principal: Principal | None = flask.g.get("principal")
    periods = app.data.periods()
    try:
        clusters = sorted(app.data.org_bill(periods[0]).clusters)
    except GpuledgerError:
        clusters = []
    nav = [dcc.Link(p.title, href=p.path, id=p.nav_id, className="nav-link",
                    style={} if principal is None or p.allows(principal) else {"display": "none"})
           for p in LAKE_PAGES]
    filters = html.Div([
        html.Label(["Period", dcc.Dropdown(id="f-period", options=periods, value=periods[0],
                                           clearable=False, searchable=False)]),
        html.Label(["Cluster", dcc.Dropdown(id="f-cluster", options=clusters, clearable=True,
                                            placeholder="all clusters")]),
    ], className="filters")
    who = "" if principal is None else f"{principal.user} · {role_label(principal)}"
    who += " · dev mode" if app.policy.dev_mode else ""
    return html.Div([
        dcc.Location(id="url", refresh=False),
        html.Header([html.Div([html.Span("gpuledger", className="brand"), html.Nav(nav, className="nav")],
                              className="topline"),
                     filters, html.Div(html.Span(who, id="whoami-text"), id="whoami", className="whoami")],
                    className="header"),
        html.Div(f"Lake mode (read-only): published bills of {app.data.lake.uri}.", id="banner",
                 className="banner"),
        dcc.Loading(html.Main(id="page"), type="dot", delay_show=400),
    ], className="app")


def render_page(app: LakeDashboard, principal: Principal, pathname: str | None, period: str | None,
                cluster: str | None) -> Any:
    """The lake page at `pathname`, or a refusal / error panel (plain: tested without a browser)."""
    try:
        ctx = LakeContext(principal, period or app.data.default_period(), cluster or None, app.data)
        return lake_page_for(pathname).show(ctx)
    except AccessDeniedError as exc:
        return refusal(str(exc))
    except GpuledgerError as exc:
        return html.Div([html.H2("Cannot show this page"), html.P(str(exc))], className="error", id="error")


def create_lake_app(
    settings: Settings, lake_uri: str, *, dev_user: str | None = None, dev_groups: Sequence[str] = (),
    refresh_s: float = 120.0,
) -> LakeDashboard:
    """Build the lake-mode app for `lake_uri` (a path or s3://bucket/prefix, `lake.*` settings)."""
    preload()
    lake = Lake.open(lake_uri, settings.lake, signing_key(settings))  # checks manifests (0176)
    policy = AccessPolicy(settings.access, dev_user, tuple(dev_groups))
    dash_app = Dash(__name__, title="gpuledger · org", update_title="", assets_folder=str(ASSETS),
                    suppress_callback_exceptions=True)
    app = LakeDashboard(dash_app, LakeReadModel(lake, settings, refresh_s), policy, settings)
    dash_app.layout = lambda: layout(app)
    install_limits(app)
    install_auth(app)

    @app.server.route("/healthz")
    def _health() -> flask.Response:
        return flask.jsonify({"ok": True, "lake": lake.uri, "mode": "lake"})

    @app.server.route("/api/v1/", defaults={"rest": ""})
    @app.server.route("/api/v1/<path:rest>")
    def _no_api(rest: str) -> flask.Response:
        """Not the page's HTML with a 200 (issue 31): the JSON API reads a cluster's warehouse,
        and lake mode serves none, so a client is told so in the API's own error shape."""
        return flask.Response(json.dumps({"error": "the JSON API is not served in lake mode "
                                          "(serve --lake); serve a cluster's warehouse for /api/v1/",
                                          "status": 501}), status=501, mimetype="application/json")

    @dash_app.callback(Output("page", "children"), Input("url", "pathname"), Input("f-period", "value"),
                       Input("f-cluster", "value"))
    def _render(pathname: str | None, period: str | None, cluster: str | None) -> Any:
        return render_page(app, _principal(), pathname, period, cluster)

    return app
