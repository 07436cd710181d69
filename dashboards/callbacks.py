"""The Dash callbacks: thin wrappers that find the requester and call plain functions.

Every callback starts from `flask.g.principal`, set for this very HTTP request by the
authentication hook (`dashboards.app`), never from anything the browser sends as data. What the
browser sends (URL, filter values, plan id) is only a request; the page's registry entry
(`dashboards.registry`), its `view()` and each `PlanActions` method decide on the server whether
this principal may have it.
"""

from __future__ import annotations

from typing import Any

import flask
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from gpuledger.analytics.usage.plan import RulesRefusal
from gpuledger.core.access import Principal
from gpuledger.core.errors import AccessDeniedError, GpuledgerError
from gpuledger.dashboards import shell
from gpuledger.dashboards.access import can_see_fleet
from gpuledger.dashboards.actions import describe_error
from gpuledger.dashboards.pages import plans
from gpuledger.dashboards.pages.common import PageContext, refusal, rules_refusal
from gpuledger.dashboards.registry import PAGES, page_for, page_of
from gpuledger.dashboards.state import ViewState
from gpuledger.dashboards.wiring import DashboardApp
from gpuledger.warehouse.snapshot_store import WarehouseBusyError

ACTION_BUTTONS = ("btn-approve", "btn-reject", "btn-preview", "btn-apply")


def current_principal() -> Principal:
    principal = flask.g.get("principal")
    if principal is None:  # the hook answers 401 before any callback runs; belt and braces
        raise AccessDeniedError("no authenticated user for this request")
    return principal


# 1. Plain functions (tested without a browser) --------------------------------------------------
def render_page(app: DashboardApp, principal: Principal, view: dict[str, Any] | None) -> Any:
    """The page for the view state, or a refusal / busy / error panel."""
    try:
        default = app.data.default_period()
        page = page_for((view or {}).get("page"))
        state = ViewState.from_dict(view, default)
        return page.show(PageContext(principal, state, app.data, app.settings, app.actions))
    except AccessDeniedError as exc:
        return refusal(str(exc))
    except RulesRefusal as exc:
        snap = app.data.serving_snapshot
        return rules_refusal(str(exc), exc.hint, serving_store=snap is not None and not snap.owned)
    except WarehouseBusyError as exc:
        return html.Div(
            [html.H2("Warehouse busy, retrying"), html.P(str(exc)),
             dcc.Interval(id="retry-tick", interval=5000)],
            className="busy", id="busy",
        )
    except GpuledgerError as exc:
        return html.Div([html.H2("Cannot show this page"), html.P(str(exc))], className="error", id="error")


def run_action(
    app: DashboardApp, principal: Principal, button: str | None, plan_id: str | None, reason: str | None,
) -> tuple[str, bool]:
    """Run one plan button on the server; returns (message, ok)."""
    if button not in ACTION_BUTTONS or not plan_id:
        return "", False
    actions = app.actions
    try:
        if button == "btn-approve":
            return actions.approve(principal, plan_id), True
        if button == "btn-reject":
            return actions.reject(principal, plan_id, reason), True
        if button == "btn-preview":
            result = actions.preview(principal, plan_id)
            return f"Dry run of {plan_id}: {result.get('message', '')}", True
        rollout = actions.start_apply(principal, plan_id)
        return f"Rollout of {plan_id} started by {rollout.user}", True
    except Exception as exc:
        prefix = "Refused: " if isinstance(exc, AccessDeniedError) else ""
        return prefix + describe_error(exc), False


def drill_down(app: DashboardApp, click: dict[str, Any] | None, search: str | None) -> Any:
    """A click on a node's row of the fleet heatmap opens that node's GPUs (via the URL)."""
    points = (click or {}).get("points") or []
    state = ViewState.from_query(search, app.data.default_period())
    if not points or state.node:
        return no_update
    node = str(points[0].get("y", ""))
    return state.with_(node=node).to_query() if node else no_update


def rollout_status(app: DashboardApp, principal: Principal, plan_id: str | None) -> tuple[Any, bool]:
    """The live rollout panel and whether polling can stop."""
    if not can_see_fleet(principal) or not plan_id:
        return refusal(f"user {principal.user!r} may not see rollouts"), True
    rollout = app.actions.rollouts.get(plan_id)
    return plans.rollout_panel(rollout), rollout is None or not rollout.running


# 2. Registration ------------------------------------------------------------------------------
def register(app: DashboardApp) -> None:
    """Wire every callback of the app (each a thin wrapper over a plain function above)."""
    _register_sync(app)
    _register_page(app)
    _register_actions(app)


def _register_sync(app: DashboardApp) -> None:
    """URL ⇄ filter controls, navigation links, the view state and the user line."""
    nav_out = [Output(page.nav_id, "href") for page in PAGES]
    nav_style = [Output(page.nav_id, "style") for page in PAGES]

    @app.dash.callback(
        Output("url", "search"),
        Output("f-period", "value"), Output("f-period", "options"),
        Output("f-team", "value"), Output("f-team", "options"),
        Output("f-model", "value"), Output("f-model", "options"),
        *nav_out, *nav_style,
        Output("view", "data"), Output("whoami", "children"),
        Input("url", "pathname"), Input("url", "search"),
        Input("f-period", "value"), Input("f-team", "value"), Input("f-model", "value"),
    )
    def _sync(pathname: str | None, search: str | None, period: str | None, team_: str | None,
              model: str | None) -> tuple[Any, ...]:
        principal = current_principal()
        try:
            result = shell.sync(app.data, principal, pathname, search, trigger=ctx.triggered_id,
                                controls=(period, team_, model))
        except GpuledgerError:
            return (no_update,) * (7 + 2 * len(PAGES)) + (
                {"page": page_of(pathname, principal)}, shell.whoami(principal, app.policy.dev_mode))
        from_control = ctx.triggered_id in shell.FILTER_IDS
        s = result.state
        return (
            result.search if from_control and result.search != (search or "") else no_update,
            s.period, result.period_options, s.team, result.team_options, s.model, result.model_options,
            *result.hrefs, *shell.nav_visible(principal),
            result.view, shell.whoami(principal, app.policy.dev_mode),
        )


def _register_page(app: DashboardApp) -> None:
    """The page itself, the freshness banner, the busy retry and the heatmap drill-down."""
    dash_app: Dash = app.dash

    @dash_app.callback(Output("page", "children"), Input("view", "data"), Input("bump", "data"))
    def _render(view: dict[str, Any] | None, _bump: int | None) -> Any:
        return render_page(app, current_principal(), view)

    @dash_app.callback(Output("banner", "children"), Input("tick", "n_intervals"), Input("view", "data"))
    def _banner(_n: int | None, _view: Any) -> Any:
        return shell.banner(app.store, app.data.serving_snapshot, data=app.data)

    @dash_app.callback(
        Output("bump", "data", allow_duplicate=True), Input("retry-tick", "n_intervals"),
        State("bump", "data"), prevent_initial_call=True,
    )
    def _retry(_n: int | None, bump: int | None) -> Any:
        app.store.refresh()
        return (bump or 0) + 1 if app.store.snapshot is not None else no_update

    @dash_app.callback(
        Output("url", "search", allow_duplicate=True), Input("fleet-heatmap", "clickData"),
        State("url", "search"), prevent_initial_call=True,
    )
    def _drill(click: dict[str, Any] | None, search: str | None) -> Any:
        return drill_down(app, click, search)


def _register_actions(app: DashboardApp) -> None:
    """The Plans page's buttons and the live rollout panel."""
    dash_app: Dash = app.dash

    @dash_app.callback(
        Output("flash", "children"), Output("bump", "data", allow_duplicate=True),
        *[Input(b, "n_clicks") for b in ACTION_BUTTONS],
        State("reject-reason", "value"), State("plan-id", "data"), State("bump", "data"),
        prevent_initial_call=True,
    )
    def _act(*args: Any) -> tuple[Any, Any]:
        reason, plan_id, bump = args[-3], args[-2], args[-1]
        if not any(args[: len(ACTION_BUTTONS)]):
            return no_update, no_update
        message, ok = run_action(app, current_principal(), ctx.triggered_id, plan_id, reason)
        flash_ = html.Div(message, className="ok" if ok else "refused", id="flash-message")
        return flash_, (bump or 0) + 1

    @dash_app.callback(
        Output("rollout-status", "children"), Output("rollout-tick", "disabled"),
        Input("rollout-tick", "n_intervals"), State("plan-id", "data"), prevent_initial_call=True,
    )
    def _rollout(_n: int | None, plan_id: str | None) -> tuple[Any, bool]:
        return rollout_status(app, current_principal(), plan_id)
