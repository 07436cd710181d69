"""The operational side of the dashboard's HTTP server: probes, metrics, 404s, request logs.

Why each rule:
1. `/healthz` (liveness) answers 200 while the process serves HTTP at all; `/readyz`
   (readiness) answers 200 once there is data to serve (a warmed snapshot promoted to serving,
   or no warehouse file yet, so a fresh install becomes ready before its first collection) and
   503 before, so a rollout waits for a pod that answers pages at once.
2. Unknown paths answer 404. Dash serves its page shell for *any* path (a catch-all route),
   so `/metrics` or `/wp-login.php` used to answer 200 with the app's HTML; now only the
   registered pages, Dash's own endpoints and our routes exist.
3. `/metrics` (prometheus_client text format) serves `dashboards.metrics.LedgerCollector`, the
   request counters below and the process metrics. On the app's own port it needs an
   admin or viewer (it shows every team's cost); on the *ops port* (`--metrics-port`, what
   the ServiceMonitor and the kubelet's probes use) only `/healthz`, `/readyz` and `/metrics`
   exist, unauthenticated, and every other path is 404 there, so the ops port can never reach a
   page, a download or a callback.
4. Every request is counted (`gpuledger_http_requests_total` {method, route, code}) and timed
   (`gpuledger_http_request_duration_seconds` {route}), with the *route pattern*, never the raw
   path, as label (bounded cardinality), and logged as one record of logger `gpuledger.http`
   with method, path (no query string: tokens travel there), status, duration and user.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import flask
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.process_collector import ProcessCollector

from gpuledger.dashboards.metrics import LedgerCollector
from gpuledger.dashboards.registry import PAGES
from gpuledger.dashboards.wiring import DashboardApp

OPS_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
CATCH_ALL = "/<path:path>"
PAGE_PATHS = frozenset({"/", *(p.path for p in PAGES)})
OPS_PORT_KEY = "GPULEDGER_OPS_PORT"
log = logging.getLogger("gpuledger.http")


class _Instruments:
    def __init__(self, app: DashboardApp) -> None:
        disable_created_metrics()  # `*_created` series double what is stored for no use here
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(LedgerCollector(app.data, app.settings, str(app.store.source)))
        ProcessCollector(registry=self.registry)
        self.requests = Counter("gpuledger_http_requests", "HTTP requests answered",
                                ["method", "route", "code"], registry=self.registry)
        self.latency = Histogram("gpuledger_http_request_duration_seconds", "Time to answer a request",
                                 ["route"], registry=self.registry,
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))


def local_port(environ: dict[str, Any]) -> int | None:
    """The port the request arrived on: gunicorn's socket, else the server's SERVER_PORT
    (Werkzeug sets it from its own address; gunicorn from the Host header, hence the socket)."""
    sock = environ.get("gunicorn.socket")
    if sock is not None:
        try:
            return int(sock.getsockname()[1])
        except (OSError, IndexError, TypeError, ValueError):
            return None
    try:
        return int(environ.get("SERVER_PORT", ""))
    except ValueError:
        return None


def on_ops_port(request: flask.Request) -> bool:
    ops = flask.current_app.config.get(OPS_PORT_KEY)
    return ops is not None and local_port(request.environ) == ops


def is_public(request: flask.Request) -> bool:
    """No authentication: the probes anywhere, the metrics on the ops port (rule 3)."""
    return request.path in PROBE_PATHS or (request.path == "/metrics" and on_ops_port(request))


def _route(request: flask.Request) -> str:
    rule = request.url_rule
    if rule is None:
        return "unmatched"
    if rule.rule == CATCH_ALL:
        path = request.path.rstrip("/") or "/"
        return path if path in PAGE_PATHS else "unmatched"
    return str(rule.rule)


def _not_found() -> flask.Response:
    return flask.Response("404 Not Found\n", status=404, mimetype="text/plain")


def install(app: DashboardApp, ops_port: int | None = None) -> None:
    """Rules 1-4; call after the body limits and before authentication."""
    server = app.server
    server.config[OPS_PORT_KEY] = ops_port
    inst = _Instruments(app)
    server.extensions["gpuledger_metrics"] = inst.registry

    @server.before_request
    def _start_and_route() -> flask.Response | None:
        request = flask.request
        flask.g.started = time.perf_counter()
        log.debug("start %s %s", request.method, request.path,
                  extra={"event": "start", "method": request.method, "path": request.path})
        if on_ops_port(request):
            return None if request.path in OPS_PATHS else _not_found()
        if _route(request) == "unmatched":
            return _not_found()
        return None

    @server.after_request
    def _count(response: flask.Response) -> flask.Response:
        request = flask.request
        route = _route(request)
        started = flask.g.get("started")
        elapsed = time.perf_counter() - started if started is not None else 0.0
        inst.requests.labels(request.method, route, str(response.status_code)).inc()
        inst.latency.labels(route).observe(elapsed)
        principal = flask.g.get("principal")
        log.info("%s %s %s", request.method, request.path, response.status_code, extra={
            "method": request.method, "path": request.path, "route": route,
            "status": response.status_code, "duration_ms": round(elapsed * 1000, 1),
            "user": getattr(principal, "user", None), "remote": request.remote_addr,
        })
        return response

    @server.route("/readyz")
    def _ready() -> flask.Response:
        store = app.store
        ready = app.data.serving_snapshot is not None or not Path(store.source).exists()
        body = flask.jsonify({"ready": ready, "warehouse": store.status()})
        body.status_code = 200 if ready else 503
        return body

    @server.route("/metrics")
    def _metrics() -> flask.Response:
        if not on_ops_port(flask.request):
            principal = flask.g.get("principal")
            if principal is None or not (principal.admin or principal.viewer):
                return flask.Response("403 Forbidden: /metrics shows every team's cost (admins and "
                                      "viewers only; Prometheus scrapes the ops port)\n",
                                      status=403, mimetype="text/plain")
        return flask.Response(generate_latest(inst.registry), mimetype=None,
                              headers={"Content-Type": CONTENT_TYPE_LATEST})
