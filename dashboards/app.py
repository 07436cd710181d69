"""The dashboard application: Flask + Dash, the authentication hook, the CSV route, a server.

`create_app()` builds everything for one warehouse; `serve()` runs it until interrupted (what
`gpuledger serve` and the end of `gpuledger demo` call); `start_server()` runs it in a thread
and returns a handle with `.url` and `.stop()` (tests, benchmarks).

Authentication, the security headers and the request-size limits are `dashboards.http_guards`
(shared with the lake dashboard). Safe to expose (issue 22, item 5), because the page carries
Approve and Apply buttons; besides those guards:
3. Every value that reaches a response header is validated: the CSV route's `team`/`model` must
   be Kubernetes label values, so no `"` or `;` can add a second `filename=`.
4. Connections are bounded: at most `MAX_CONNECTIONS` are served at once (one thread each), the
   next is answered 503 and closed, and a connection idle for `CONNECTION_TIMEOUT_S` is dropped,
   so a slow or flooding client cannot grow threads and memory without limit.
"""

from __future__ import annotations

import io
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flask
import polars as pl
from dash import Dash
from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer, WSGIRequestHandler

from gpuledger.core.access import Principal
from gpuledger.core.config import Settings
from gpuledger.core.errors import GpuledgerError, InputError
from gpuledger.dashboards import api, callbacks, http_ops, shell
from gpuledger.dashboards.access import AccessPolicy, check_dev_bind
from gpuledger.dashboards.actions import PlanActions
from gpuledger.dashboards.http_guards import ASSETS, install_auth, install_limits, preload
from gpuledger.dashboards.readmodel import ReadModel
from gpuledger.dashboards.serving_results import publish_serving
from gpuledger.dashboards.state import label_value, valid_period
from gpuledger.dashboards.wiring import DashboardApp, Servable
from gpuledger.warehouse.snapshot_store import SnapshotStore

MAX_CONNECTIONS = 64
"""Connections served at once (a browser opens about six)."""
CONNECTION_TIMEOUT_S = 30.0
"""An idle or stalled connection is closed after this long."""


def create_app(
    settings: Settings,
    warehouse_path: str | Path,
    *,
    dev_user: str | None = None,
    dev_groups: Sequence[str] = (),
    refresh_s: float = 120.0,
    cache_dir: Path | None = None,
    cluster_factory: Callable[[], Any] | None = None,
    background: bool = True,
    ops_port: int | None = None,
) -> DashboardApp:
    """Build the app for `warehouse_path` (read through snapshots, see `warehouse.snapshot_store`).

    `cluster_factory` returns an `actuator.gateway.ClusterGateway` for preview/apply (None: the
    Plans page can approve and reject but not apply). `background=False` skips the refresh
    thread (tests that refresh by hand). `ops_port`: the port on which only the probes and
    `/metrics` are served, unauthenticated (`dashboards.http_ops`).
    """
    preload()
    policy = AccessPolicy(settings.access, dev_user, tuple(dev_groups))
    store = SnapshotStore(Path(warehouse_path), cache_dir=cache_dir, refresh_s=refresh_s,
                          publisher=lambda wh: publish_serving(wh, settings))
    data = ReadModel(store, settings)
    store.on_new_snapshot(data.warm)
    store.on_write(data.capture_plans)
    actions = PlanActions(store, settings, cluster_factory)
    dash_app = Dash(
        __name__, title="gpuledger", update_title="", assets_folder=str(ASSETS),
        suppress_callback_exceptions=True,
    )
    dash_app.layout = shell.layout(refresh_s)
    app = DashboardApp(dash_app, store, data, policy, settings, actions)
    install_limits(app)
    http_ops.install(app, ops_port)
    install_auth(app)
    _install_routes(app)
    api.register(app)  # /api/v1 and the Teams CSV: behind the same authentication hook
    callbacks.register(app)
    if background:
        store.start()
    return app


def _install_routes(app: DashboardApp) -> None:
    server = app.server

    @server.route("/healthz")
    def _health() -> flask.Response:
        return flask.jsonify({"ok": True, "warehouse": app.store.status()})

    @server.route("/download/bill.csv")
    def _download() -> flask.Response:
        principal: Principal = flask.g.principal
        try:
            body, name = bill_csv(app, principal, flask.request.args)
        except PermissionError as exc:
            return flask.Response(f"403 Forbidden: {exc}\n", status=403, mimetype="text/plain")
        except InputError as exc:
            return flask.Response(f"400 Bad Request: {exc}\n", status=400, mimetype="text/plain")
        except GpuledgerError as exc:
            return flask.Response(f"503 Service Unavailable: {exc}\n", status=503, mimetype="text/plain")
        return flask.Response(
            body, mimetype="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )


def bill_csv(app: DashboardApp, principal: Principal, args: Any) -> tuple[str, str]:
    """The bill's detail rows as CSV for one team (any team for admins/viewers; all teams
    when none is named). Raises PermissionError for a team the principal may not see."""
    period = args.get("period") or app.data.default_period()
    if not valid_period(period):
        raise InputError(f"period {period!r}: expected YYYY-MM")
    team = _label_value(args.get("team"), "team")
    model = _label_value(args.get("model"), "model")
    if team is None and not (principal.admin or principal.viewer):
        if len(principal.lead_of) != 1:
            raise InputError("name the team: ?team=<your team>")
        team = next(iter(principal.lead_of))
    if team is not None and not principal.can_see_team(team):
        raise PermissionError(f"user {principal.user!r} may not download team {team!r}'s bill")

    def render() -> str:
        detail: pl.DataFrame = app.data.bill(period).detail
        if team is not None:
            detail = detail.filter(pl.col("team") == team)
        if model is not None:
            detail = detail.filter(pl.col("model") == model)
        buffer = io.StringIO()
        detail.write_csv(buffer)
        return buffer.getvalue()

    name = f"gpuledger-bill-{period}-{team or 'all'}{'-' + model if model else ''}.csv"
    return app.data.memo(("csv", period, team, model), render), name


def _label_value(value: str | None, what: str) -> str | None:
    """A team or model name from the URL, refused unless it is a Kubernetes label value: it
    ends up in the Content-Disposition header (rule 3; `dashboards.state.label_value`)."""
    return label_value(value, what)


# Serving ----------------------------------------------------------------------------------------
class _RequestHandler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT_S  # socketserver applies it to the connection: idle ones end


class BoundedWSGIServer(ThreadedWSGIServer):
    """Werkzeug's threaded server with a bound on connections served at once (rule 4)."""

    def __init__(self, host: str, port: int, app: Any, *, max_connections: int = MAX_CONNECTIONS,
                 timeout_s: float = CONNECTION_TIMEOUT_S) -> None:
        handler = type("_BoundedHandler", (_RequestHandler,), {"timeout": timeout_s})
        super().__init__(host, port, app, handler=handler)
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        try:
            request.settimeout(1.0)
            request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: 22\r\n\r\n"
                            b"503: too many clients\n")
        except OSError:
            pass
        finally:
            self.shutdown_request(request)


@dataclass
class RunningServer:
    """A dashboard served from a background thread."""

    app: Servable
    server: BaseWSGIServer
    thread: threading.Thread

    @property
    def host(self) -> str:
        return str(self.server.host)

    @property
    def port(self) -> int:
        return int(self.server.port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        self.server.server_close()
        self.app.close()


def start_server(
    app: Servable, host: str = "127.0.0.1", port: int = 0, *,
    max_connections: int = MAX_CONNECTIONS, timeout_s: float = CONNECTION_TIMEOUT_S,
) -> RunningServer:
    """Serve `app` on `host:port` (0 = a free port) in a thread; `.stop()` ends it."""
    check_dev_bind(host, app.policy.dev_user)
    try:
        server = BoundedWSGIServer(host, port, app.server, max_connections=max_connections,
                                   timeout_s=timeout_s)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    thread = threading.Thread(target=server.serve_forever, name="gpuledger-dash-http", daemon=True)
    thread.start()
    return RunningServer(app, server, thread)


def serve(  # noqa: PLR0917 (the demo calls it positionally)
    settings: Settings,
    warehouse_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8050,
    dev_user: str | None = None,
    dev_groups: Sequence[str] = (),
    *,
    cluster_factory: Callable[[], Any] | None = None,
    on_start: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    refresh_s: float = 120.0,
) -> None:
    """Serve the dashboard until Ctrl-C (or until `stop` is set). What `gpuledger serve` and
    `gpuledger demo` call. `--dev-user` is refused unless `host` is loopback."""
    check_dev_bind(host, dev_user)
    app = create_app(settings, warehouse_path, dev_user=dev_user, dev_groups=dev_groups,
                     cluster_factory=cluster_factory, refresh_s=refresh_s)
    running = start_server(app, host, port)
    if on_start is not None:
        on_start(running.url)
    event = stop or threading.Event()
    restore = _stop_on_sigterm(event)
    try:
        while not event.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()  # deletes the private snapshots
        restore()


def _stop_on_sigterm(event: threading.Event) -> Callable[[], None]:
    """SIGTERM sets `event`, so the server stops the way Ctrl-C does and deletes its snapshots
    (the default action killed the process with a warehouse-sized copy left in /tmp)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: event.set())

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
