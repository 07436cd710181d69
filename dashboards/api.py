"""The read-only JSON API under `/api/v1/` and the Teams CSV, on the dashboard's own server.

Why on the dashboard's server and not a second one: the API must answer to exactly the roles
the pages answer to, and the dashboard already authenticates every request before it reaches
any route (`dashboards.http_guards`: no principal → 401, no role → 403, headers believed only from a
proxy address). A blueprint registered by the app factory inherits that hook, the security
headers and the request-size limits, and reads the same cached snapshot views
(`dashboards.readmodel`), so an API answer and the page beside it are the same numbers.

Scope, decided here on the server for every request:
- admins and viewers (finance) read every team; `?team=X` narrows to one;
- a lead reads only the teams they lead (`?team=` naming another → 403), and every document
  is cut by one rule after its handler (`analytics.exports.scope_document`: each section of
  each schema declared team rows, fleet data or about; undeclared sections withheld);
- plans are fleet data: admins and viewers only, as on the Plans page.

Endpoints (GET; time parameters `period=YYYY-MM|last`, `start`/`end` or `window=7d|30d|month-to-date`,
default the newest month with data; every parameter an endpoint takes is declared once in
`dashboards.api_params`, which refuses unknown ones with a 400 naming the accepted ones and
writes the OpenAPI description served at `/api/v1/openapi.json`):
`/api/v1/bill?by=team,model[&as_computed=true]` (the `gpuledger.bill/v1` document of `gpuledger
bill --format json [--as-computed]`, plus `notes`: what the CLI prints on stderr,
`analytics.billing.notes`), `/api/v1/idle?by=owner|pod|label:<key>&team=&namespace=&top=`,
`/api/v1/recommendations?team=&namespace=` (the writer's stored result: `rules_current` false and
a `rules_note` when it was computed under other rules than this server's, docs/decisions/0150),
`/api/v1/plans`, `/api/v1/capacity` and `/api/v1/why?name=` (`dashboards.capacity_data`: what is
free now by shape, and why each workload waits).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import flask

from gpuledger.analytics import exports
from gpuledger.analytics.advice.actionable import floor_of, split
from gpuledger.analytics.billing.notes import bill_notes
from gpuledger.core.access import Principal
from gpuledger.core.errors import AccessDeniedError, GpuledgerError, InputError
from gpuledger.core.period import Period
from gpuledger.dashboards import api_params
from gpuledger.dashboards.access import can_see_fleet, scope
from gpuledger.dashboards.serving_results import RECOMMENDATIONS
from gpuledger.dashboards.state import ViewState, label_value
from gpuledger.dashboards.wiring import DashboardApp

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.snapshot_store import Snapshot

MAX_BY = 3
"""Bill dimensions one API call may group by (each combination is cached per snapshot)."""
MAX_TOP = 5000


def _dumps(doc: Any) -> str:
    return json.dumps(doc, indent=2, default=str)


def _json(doc: Any, status: int = 200) -> flask.Response:
    return flask.Response(_dumps(doc), status=status, mimetype="application/json")


@dataclass(frozen=True)
class Snapshotted:
    """A handler's unscoped document that is the same for every request naming `key` on one
    serving snapshot (docs/decisions/0210). `_guarded` cuts it per request by the one scope rule
    as any other; for a fleet reader (nothing to cut) the serialized answer is kept per snapshot
    too, so the largest answers are serialized once, not once per request."""

    key: Hashable
    doc: dict[str, Any]


def _error(status: int, message: str) -> flask.Response:
    return _json({"error": message, "status": status}, status)


def _period(app: DashboardApp) -> str:
    """The month a months-only answer is for (`period=YYYY-MM|last`, default the newest with data)."""
    return _asked(app, months_only=True).period or app.data.default_period()


def _asked(app: DashboardApp, *, months_only: bool = False) -> api_params.Asked:
    """The request's time (`dashboards.api_params`: period, start/end or window)."""
    from gpuledger.core.config import utcnow

    return api_params.asked_time(flask.request.args, now=utcnow(), default_period=app.data.default_period(),
                                 months_only=months_only)


def _name(value: str | None, what: str) -> str | None:
    return label_value(value, what)


Handler = Callable[[DashboardApp, Principal], Any]


def _guarded(handler: Handler, app: DashboardApp, path: str) -> Callable[[], flask.Response]:
    def run() -> flask.Response:
        principal: Principal = flask.g.principal
        try:
            api_params.check(path, flask.request.args)
            doc = handler(app, principal)
            # The one scope rule, after every handler (docs/decisions/0175): whatever a handler
            # built, a lead is served only the sections `exports.SECTIONS` lets them read.
            teams = scope(principal, _name(flask.request.args.get("team"), "team"))
            if isinstance(doc, Snapshotted):
                if teams is None:
                    return flask.Response(_fleet_body(app, path, doc), mimetype="application/json")
                doc = doc.doc
            return _json(exports.scope_document(doc, teams))
        except (AccessDeniedError, PermissionError) as exc:
            return _error(403, str(exc))
        except InputError as exc:
            return _error(400, str(exc))
        except GpuledgerError as exc:
            return _error(503, str(exc))

    run.__name__ = f"api_{handler.__name__.strip('_')}"
    return run


def _fleet_body(app: DashboardApp, path: str, doc: Snapshotted, snap: Snapshot | None = None) -> str:
    """A `Snapshotted` document serialized for a fleet reader (the scope rule cuts nothing),
    once per snapshot."""
    return app.data.memo(("api_body", path, doc.key),
                         lambda: _dumps(exports.scope_document(doc.doc, None)), snap)


def _bill(app: DashboardApp, principal: Principal) -> dict[str, Any]:
    teams = scope(principal, _name(flask.request.args.get("team"), "team"))
    by = tuple(d.strip() for d in (flask.request.args.get("by") or "team").split(",") if d.strip())
    by = tuple(dict.fromkeys(("team", *by)))  # team first, each dimension once
    if len(by) > MAX_BY:
        raise InputError(f"by: at most {MAX_BY} dimensions per request")
    as_computed = _flag(flask.request.args.get("as_computed"), "as_computed")
    asked = _asked(app)
    bill = (app.data.bill(asked.period, by, as_computed=as_computed) if asked.period else
            app.data.bill_over(asked.window, by, as_computed=as_computed))
    doc = {**bill.to_dict(), "notes": bill_notes(bill)}
    return exports.scope_document(doc, teams)


_TRUE, _FALSE = ("1", "true", "yes"), ("", "0", "false", "no")


def _flag(text: str | None, what: str) -> bool:
    """A boolean query parameter: `true`/`1`/`yes` or `false`/`0`/`no` (absent: false)."""
    value = (text or "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise InputError(f"{what} {text!r}: expected true or false")
    return value in _TRUE


def _idle(app: DashboardApp, principal: Principal) -> dict[str, Any]:
    from gpuledger.analytics.workloads.requested import check_workload_by, filter_scope

    args = flask.request.args
    teams = scope(principal, _name(args.get("team"), "team"))
    by = args.get("by") or "owner"
    if by != "pod":
        check_workload_by(by)
    asked = _asked(app)
    namespace = _name(args.get("namespace"), "namespace")
    # the month's (or window's) ranking is cached per snapshot (`ReadModel.idle_workloads`); cut per request
    frame = filter_scope(app.data.idle_workloads(asked.period or asked.window, by), namespace=namespace)
    frame = exports.filter_teams(frame, teams).head(_top(args.get("top")))
    return exports.idle_json(frame, asked.window, by)


def _top(text: str | None) -> int:
    try:
        top = int(text) if text else 100
    except ValueError:
        raise InputError(f"top {text!r}: expected a whole number") from None
    if not 1 <= top <= MAX_TOP:
        raise InputError(f"top: between 1 and {MAX_TOP}")
    return top


def _recommendations(app: DashboardApp, principal: Principal) -> dict[str, Any] | Snapshotted:
    """The month's stored advice. Without `namespace` the document is the snapshot's, built once
    unscoped (`Snapshotted`) and cut per request by the scope rule: the rule keeps a lead's rows
    and per-team savings and withholds the rest, which equals building it from their rows (rows
    are listed or counted one by one, `advice.actionable.split`). Built per request it cost
    0.2 s a call and 1.1 s p95 under load at 10x the small demo (issue 31)."""
    from gpuledger.analytics.workloads.requested import filter_scope

    args = flask.request.args
    teams = scope(principal, _name(args.get("team"), "team"))
    period = _period(app)
    floor = floor_of(app.settings, every=_flag(args.get("all"), "all"))
    namespace = _name(args.get("namespace"), "namespace")
    if namespace is None:
        return _month_advice(app, period, floor)
    recs = exports.filter_teams(filter_scope(app.data.recommendations(period), namespace=namespace), teams)
    return _advice(app, period, floor, recs)


def _month_advice(app: DashboardApp, period: str, floor: float, snap: Snapshot | None = None) -> Snapshotted:
    """The month's whole recommendations document, once per snapshot."""
    key = ("recommendations", period, floor)
    doc = app.data.memo(("api", *key), lambda: _advice(app, period, floor, snap=snap), snap)
    return Snapshotted(key, doc)


def _warm_advice(app: DashboardApp, snap: Snapshot) -> None:
    """Warm-up step of each new snapshot (`ReadModel.add_warm_step`): the default request's
    answer (the newest month, the configured floor), built and serialized before it is served,
    so the first call after a refresh does not pay for it."""
    floor = floor_of(app.settings)
    _fleet_body(app, "/recommendations", _month_advice(app, app.data.default_period(snap), floor, snap), snap)


def _advice(app: DashboardApp, period: str, floor: float, recs: pl.DataFrame | None = None, *,
            snap: Snapshot | None = None) -> dict[str, Any]:
    """The recommendations document of `recs` (default: all of the month's), unscoped."""
    recs = app.data.recommendations(period, snap=snap) if recs is None else recs
    missing = app.data.missing(RECOMMENDATIONS, period, snap=snap)
    doc = exports.recommendations_json(recs, Period.exact(period).window, app.settings.currency)
    shown = split(doc["recommendations"], floor)
    doc |= {"recommendations": shown.rows, "min_monthly_saving": floor,
            "below_floor": [q.as_dict() for q in shown.quiet]}
    if missing:  # unknown is never zero: no saving figure, and how to get one
        doc |= {"computed": False, "note": missing, "monthly_saving": None, "saving_by_team": None}
    else:
        doc["computed"] = True
    return {**doc, **_rules_state(app, RECOMMENDATIONS, period, snap)}


def _rules_state(app: DashboardApp, name: str, period: str, snap: Snapshot | None = None) -> dict[str, Any]:
    """Whether a stored result carries the server's rules (docs/decisions/0150): `rules_current`
    false and the note when it does not, so a client never takes stale numbers for current."""
    note = app.data.result_note(name, period, snap=snap)
    return {"rules_current": note is None, **({"rules_note": note} if note else {})}


def _plans(app: DashboardApp, principal: Principal) -> Any:
    from gpuledger.optimizer.plan.render import list_json

    if not can_see_fleet(principal):
        raise AccessDeniedError(f"user {principal.user!r} may not read plans (admins and viewers only)")
    return {"schema": "gpuledger.plans/v1", "plans": json.loads(list_json(app.data.plans_data(None).records))}


def _budgets(app: DashboardApp, principal: Principal) -> dict[str, Any]:
    """`/api/v1/budgets`: `gpuledger budgets --format json` for the request's period."""
    from gpuledger.analytics.billing.budgets import alerts, budget_status
    from gpuledger.analytics.exports import rows_json

    period = _period(app)
    bill = app.data.bill(period, ("team",))
    status = budget_status(bill, app.settings)
    return {"schema": "gpuledger.budgets/v1", "period": bill.period, "currency": bill.currency,
            "teams": rows_json(status), "alerts": alerts(status, app.settings.currency)}


def _capacity(app: DashboardApp, principal: Principal) -> dict[str, Any]:
    """`/api/v1/capacity`: `gpuledger capacity --format json` (docs/decisions/0200)."""
    from gpuledger.dashboards.capacity_data import served_capacity

    scope(principal, _name(flask.request.args.get("team"), "team"))
    return served_capacity(app.data, app.settings)


def _why(app: DashboardApp, principal: Principal) -> dict[str, Any]:
    """`/api/v1/why[?name=]`: `gpuledger why --format json`, a lead's teams only."""
    from gpuledger.analytics.waiting.fleet import why_document
    from gpuledger.core.config import utcnow
    from gpuledger.dashboards.capacity_data import served_fleet

    teams = scope(principal, _name(flask.request.args.get("team"), "team"))
    doc = why_document(served_fleet(app.data, app.settings), utcnow(), flask.request.args.get("name"),
                       app.settings.sharing.mig_share_basis)
    return exports.scope_document(doc, teams)


def _openapi() -> flask.Response:
    """The OpenAPI description of `/api/v1` (`dashboards.api_params.openapi`): the same for every
    signed-in user (it describes, it holds no data)."""
    try:
        api_params.check("/openapi.json", flask.request.args)
    except InputError as exc:
        return _error(400, str(exc))
    return _json(_description())


@functools.cache
def _description() -> dict[str, Any]:
    """The description, built once per process: it depends on nothing but `api_params` and the
    installed release, so no request reads the package metadata again."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("gpuledger")
    except PackageNotFoundError:
        release = "0"
    return api_params.openapi(release)


def _teams_csv(app: DashboardApp) -> flask.Response:
    from gpuledger.dashboards.pages.common import PageContext
    from gpuledger.dashboards.pages.teams import overview_csv

    principal: Principal = flask.g.principal
    try:
        period = _period(app)
        ctx = PageContext(principal, ViewState(period), app.data, app.settings)
        body = overview_csv(ctx)
    except (AccessDeniedError, PermissionError) as exc:
        return flask.Response(f"403 Forbidden: {exc}\n", status=403, mimetype="text/plain")
    except InputError as exc:
        return flask.Response(f"400 Bad Request: {exc}\n", status=400, mimetype="text/plain")
    except GpuledgerError as exc:
        return flask.Response(f"503 Service Unavailable: {exc}\n", status=503, mimetype="text/plain")
    return flask.Response(body, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="gpuledger-teams-{period}.csv"'})


def register(app: DashboardApp) -> None:
    """Mount `/api/v1/*` and `/download/teams.csv` on the app's server (from `create_app`)."""
    blueprint = flask.Blueprint("api_v1", __name__, url_prefix="/api/v1")
    for path, handler in (("/bill", _bill), ("/idle", _idle), ("/recommendations", _recommendations),
                          ("/plans", _plans), ("/budgets", _budgets), ("/capacity", _capacity),
                          ("/why", _why)):
        blueprint.add_url_rule(path, view_func=_guarded(handler, app, path), methods=["GET"])
    blueprint.add_url_rule("/openapi.json", view_func=_openapi, methods=["GET"])
    app.server.register_blueprint(blueprint)
    app.data.add_warm_step("api_recommendations", functools.partial(_warm_advice, app))
    app.server.add_url_rule("/download/teams.csv", "download_teams", lambda: _teams_csv(app))
