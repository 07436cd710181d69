"""A live `/metrics` endpoint: what the simulated fleet's exporters show right now.

The server maps the clock to the simulated window (the instant must fall inside it) and
renders every family for that step, so Prometheus can scrape the simulator like a cluster.
It listens on loopback by default; the clock is injectable so tests get fixed answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpuledger.core.config import utcnow
from gpuledger.core.errors import GpuledgerError, InputError
from gpuledger.simulator.openmetrics import Renderer, exposition
from gpuledger.simulator.simulated_fleet import SimulatedFleet

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], sim: SimulatedFleet, renderer: Renderer,
        clock: Callable[[], datetime],
    ) -> None:
        super().__init__(address, _Handler)
        self.sim = sim
        self.renderer = renderer
        self.clock = clock
        self.lock = threading.Lock()
        self._cached: tuple[int, str] | None = None

    def page(self) -> str:
        """The exposition for the clock's step; scrapes within one step share the rendering."""
        at = self.clock()
        k = self.sim.tb.index(at)
        with self.lock:
            if self._cached is None or self._cached[0] != k:
                self._cached = (k, exposition(self.sim, at, renderer=self.renderer))
            return self._cached[1]

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/metrics"


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        if self.path.split("?")[0] not in ("/metrics", "/"):
            self._reply(404, "not found; try /metrics\n")
            return
        if self.path.startswith("/metrics"):
            try:
                text = self.server.page()
            except GpuledgerError as exc:
                self._reply(503, f"{exc}\n")
                return
            self._reply(200, text, CONTENT_TYPE)
            return
        self._reply(200, "gpuledger simulated fleet: see /metrics\n")

    def _reply(self, status: int, body: str, content_type: str = "text/plain; charset=utf-8") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a scrape every few seconds is not news."""


def make_server(
    sim: SimulatedFleet, host: str = "127.0.0.1", port: int = 0, *,
    hostname_label: str = "Hostname", exported: bool = False,
    clock: Callable[[], datetime] = utcnow,
) -> MetricsServer:
    """Bind (port 0 picks a free one) without serving yet: call `serve_forever()`/`shutdown()`."""
    try:
        return MetricsServer((host, port), sim, Renderer(sim, hostname_label, exported), clock)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
