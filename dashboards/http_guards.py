"""What every gpuledger dashboard puts in front of its pages: headers, request limits, sign-in.

Shared by the warehouse dashboard (`dashboards.app`) and the lake one (`dashboards.lake_app`), so
both answer the same way (issue 22, item 5; rules 3 and 4 are the server's, in `dashboards.app`):
1. Every answer says `X-Frame-Options: DENY` and CSP `frame-ancestors 'none'` (no clickjacking
   from a framing page), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.
2. A request body over `MAX_REQUEST_BYTES` is refused with 413 from its Content-Length, before
   authentication and before a byte of it is read; a body without a length (chunked) is refused
   with 411, since its size is only known after reading it (Dash's renderer always sends a
   length; its callback bodies are a few kilobytes). Flask's `MAX_CONTENT_LENGTH` is a second net.

Authentication (see `dashboards.access`) runs before every request but the public probes of
`dashboards.http_ops`, the Dash callback endpoint and the download route included: no principal
→ 401, a principal without any role → 403.
"""

from __future__ import annotations

import logging
from pathlib import Path

import flask

from gpuledger.dashboards import http_ops
from gpuledger.dashboards.wiring import Servable

ASSETS = Path(__file__).parent / "assets"
"""The CSS and scripts both dashboards serve."""
log = logging.getLogger("gpuledger.serve")
DASH_CALLBACK_PATH = "/_dash-update-component"
MAX_REQUEST_BYTES = 1 << 20
"""1 MiB: far above any Dash callback body, far below what hurts the server."""
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

PRELOAD = (
    "pandas", "plotly.graph_objects", "plotly.subplots", "gpuledger.analytics.billing.bill",
    "gpuledger.analytics.workloads.idle", "gpuledger.analytics.workloads.recommend",
    "gpuledger.analytics.workloads.tokens", "scipy.cluster.vq",
    "gpuledger.optimizer.plan.contract", "gpuledger.actuator.workflow",
)
"""Imported before any thread starts: two threads importing the same big module at once can
see it half-initialized (plotly found pandas without `Series` while scikit-learn, once, was importing it)."""


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def install_limits(app: Servable) -> None:
    """Rules 1 and 2 of the module docstring; registered before authentication, so they hold
    for anonymous requests too."""
    server = app.server
    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    @server.before_request
    def _refuse_large() -> flask.Response | None:
        request = flask.request
        length = request.content_length
        if length is not None and length > MAX_REQUEST_BYTES:
            return flask.Response(
                f"413 Payload Too Large: at most {MAX_REQUEST_BYTES} bytes per request\n",
                status=413, mimetype="text/plain", headers={"Connection": "close"},
            )
        if length is None and "chunked" in request.headers.get("Transfer-Encoding", "").lower():
            return flask.Response(
                "411 Length Required: send a Content-Length (at most "
                f"{MAX_REQUEST_BYTES} bytes)\n", status=411, mimetype="text/plain",
                headers={"Connection": "close"},
            )
        return None

    def _bad_callback(exc: Exception) -> flask.Response:
        """A callback request Dash cannot take apart (a body nested 500,000 deep, an output no
        callback has): the client's error, 400 in one line, not a 500 with a traceback (issue 31).
        Other paths keep Flask's own handling (logged, 500)."""
        if flask.request.path != DASH_CALLBACK_PATH:
            raise exc
        log.warning("refused a malformed callback request: %s: %.200s", type(exc).__name__, exc)
        return flask.Response(f"400 Bad Request: malformed callback request ({type(exc).__name__})\n",
                              status=400, mimetype="text/plain")

    for kind in (RecursionError, KeyError, IndexError, TypeError, ValueError, AttributeError):
        server.register_error_handler(kind, _bad_callback)

    @server.after_request
    def _security_headers(response: flask.Response) -> flask.Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def install_auth(app: Servable) -> None:
    server = app.server

    @server.before_request
    def _authenticate() -> flask.Response | None:
        if http_ops.is_public(flask.request):
            return None
        principal = app.policy.principal_for(flask.request.remote_addr, flask.request.headers)
        if principal is None:
            return flask.Response(
                "401 Unauthorized: no authenticated user. gpuledger expects the "
                f"{app.settings.access.user_header} header from a trusted proxy "
                f"({', '.join(app.settings.access.proxy_addresses)}).\n",
                status=401, mimetype="text/plain",
                headers={"WWW-Authenticate": f'{app.settings.access.user_header} realm="gpuledger"'},
            )
        if not principal.known:
            return flask.Response(
                f"403 Forbidden: user {principal.user!r} has no role in gpuledger "
                "(ask an admin to add a binding under access.roles).\n",
                status=403, mimetype="text/plain",
            )
        flask.g.principal = principal
        return None
