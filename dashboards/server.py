"""`gpuledger serve` in production: gunicorn, one worker process with threads, graceful stop.

Why gunicorn (decision note 0066): it is the WSGI server the Flask docs deploy on, and its
SIGTERM handling is what a Kubernetes pod needs: the master forwards SIGTERM, the worker stops
accepting, finishes the requests in flight (up to `graceful_s`), runs its exit hook and ends.
Our exit hook closes the app, which deletes every private snapshot the worker took
(`warehouse.snapshot_store`), so no warehouse-sized copy is left in /tmp. Werkzeug's server,
used before, is a development server and died on SIGTERM with its snapshot on disk.

Shape: exactly one worker (`workers=1`): the snapshots, their per-snapshot caches and the plan
actions live in one process, and DuckDB wants one writer; concurrency comes from `threads`
(gthread worker), at most `max_connections` connections at once (the next one is answered 503),
idle keep-alive connections dropped after a few seconds, a request header that takes longer
than `header_timeout_s` (`--header-timeout-s`) closed however slowly it trickles, and a
header read off the threads (`dashboards.server_guard`: slow or idle sockets cost a file
descriptor, never one of the threads). The app is built in the
worker after the fork, never in the master, so no DuckDB connection or thread crosses a fork.
A background task (the report schedule) runs in the worker too and is stopped by the same exit
hook.

Binds: the app's address (behind the auth proxy: 127.0.0.1) and, optionally, the ops port on
`ops_host` (`--metrics-host`; default the pod's address, `POD_IP`, else loopback), where only
the probes and `/metrics` answer (`dashboards.http_ops`, docs/decisions/0177).
Logs: gunicorn's own messages go through the process's logging (`core.logs`, text or JSON);
its access log is off, `dashboards.http_ops` logs each request instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gunicorn import glogging
from gunicorn.app.base import BaseApplication

from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.dashboards.access import check_dev_bind

log = logging.getLogger("gpuledger.serve")
Background = Callable[[threading.Event], None]


def default_ops_host() -> str:
    """The pod's own address when Kubernetes gives it (`POD_IP`, the downward API the chart
    sets), else loopback: never every interface by default, so `/metrics` (fleet-wide numbers,
    unauthenticated) is not reachable from a network the operator did not choose."""
    import os

    return os.environ.get("POD_IP", "").strip() or "127.0.0.1"


@dataclass(frozen=True)
class ServeOptions:
    """What `gpuledger serve` passes to `serve_production`."""

    host: str = "127.0.0.1"
    port: int = 8050
    ops_port: int | None = None
    ops_host: str = field(default_factory=default_ops_host)
    """The ops port's address (`--metrics-host`): docs/decisions/0177."""
    dev_user: str | None = None
    dev_groups: Sequence[str] = ()
    refresh_s: float = 120.0
    threads: int = 8
    max_connections: int = 64
    graceful_s: float = 30.0
    keepalive_s: float = 5.0
    header_timeout_s: float = 30.0
    """A request's header must be complete this long after the connection (or its previous
    request) is ready for it, else the connection is closed (`dashboards.server_guard`)."""
    stall_timeout_s: float = 30.0
    cache_dir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _ProcessLogging(glogging.Logger):
    """gunicorn's error log through the root logger (our handler and format); no access log."""

    def setup(self, cfg: Any) -> None:
        self.error_log.handlers.clear()
        self.error_log.propagate = True
        self.error_log.setLevel(logging.INFO)
        self.access_log.handlers.clear()
        self.access_log.propagate = False
        self.access_log.disabled = True


class _Gunicorn(BaseApplication):
    def __init__(self, options: dict[str, Any], load: Callable[[], Any]) -> None:
        self._options = options
        self._load = load
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self._load()


def _bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_options(opts: ServeOptions) -> dict[str, Any]:
    binds = [_bind(opts.host, opts.port)]
    if opts.ops_port is not None:
        binds.append(_bind(opts.ops_host, opts.ops_port))
    from gpuledger.dashboards.server_guard import worker_class

    return {
        "bind": binds, "workers": 1, "threads": opts.threads,
        "worker_class": worker_class(opts.header_timeout_s, opts.stall_timeout_s),
        "worker_connections": opts.max_connections, "graceful_timeout": round(opts.graceful_s),
        "timeout": 120, "keepalive": round(opts.keepalive_s), "preload_app": False, "backlog": 256,
        "logger_class": _ProcessLogging, "accesslog": None, "capture_output": False,
        "proc_name": "gpuledger-serve", "limit_request_line": 8190, "limit_request_fields": 100,
        "limit_request_field_size": 8190, "control_socket_disable": True,
        **opts.extra,
    }


def check(opts: ServeOptions) -> None:
    """Refuse bad flags before anything starts (one line, not a gunicorn traceback)."""
    check_dev_bind(opts.host, opts.dev_user)
    for name, port in (("--port", opts.port), ("--metrics-port", opts.ops_port)):
        if port is not None and not 1 <= port <= 65535:
            raise InputError(f"{name} {port}: expected a TCP port from 1 to 65535")
    if opts.ops_port is not None and opts.ops_port == opts.port:
        raise InputError(f"--metrics-port {opts.ops_port}: must differ from --port")


def serve_production(
    settings: Settings, warehouse_path: str | Path, opts: ServeOptions, *,
    cluster_factory: Callable[[], Any] | None = None, background: Background | None = None,
    on_start: Callable[[str], None] | None = None, app_factory: Callable[[], Any] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status (0 after a graceful stop).
    `app_factory` builds another app in the worker instead (lake mode: `dashboards.lake_app`)."""
    check(opts)
    state: dict[str, Any] = {}
    stop = threading.Event()

    def load() -> Any:  # in the worker, after the fork
        from gpuledger.dashboards.app import create_app

        app = app_factory() if app_factory is not None else create_app(
            settings, warehouse_path, dev_user=opts.dev_user, dev_groups=opts.dev_groups,
            refresh_s=opts.refresh_s, cache_dir=opts.cache_dir, cluster_factory=cluster_factory,
            ops_port=opts.ops_port)
        state["app"] = app
        if background is not None:
            state["thread"] = threading.Thread(target=background, args=(stop,), daemon=True,
                                               name="gpuledger-background")
            state["thread"].start()
        return app.server

    def worker_exit(_server: Any, _worker: Any) -> None:
        stop.set()
        thread = state.get("thread")
        if thread is not None:
            thread.join(timeout=30)
        app = state.pop("app", None)
        if app is not None:
            app.close()
            log.info("stopped: snapshots deleted", extra={"event": "worker_exit"})

    def when_ready(_server: Any) -> None:
        if on_start is not None:
            host = f"[{opts.host}]" if ":" in opts.host else opts.host
            on_start(f"http://{host}:{opts.port}")

    options = {**gunicorn_options(opts), "worker_exit": worker_exit, "when_ready": when_ready}
    try:
        _Gunicorn(options, load).run()
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0
