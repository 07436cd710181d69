"""Choosing the read path: `auto` finds each engine's bulk read, falls back to `query_range`
where neither bulk endpoint is served, and a forced path that is not served is one clear error.

"Not served" is a real query layer in front of a real Prometheus: a small reverse proxy that
forwards the PromQL API and answers 404 for `/api/v1/read` and `/api/v1/export`, as Thanos
Query or a PromQL-only gateway does. The frames read through it equal the direct query path's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from gpuledger.collectors.prometheus import PrometheusCollector
from gpuledger.core.errors import SourceError
from gpuledger.core.window import Window
from tests.collectors import tinyfleet
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

pytestmark = [pytest.mark.prometheus, pytest.mark.victoriametrics]

WINDOW = Window(tinyfleet.T0, tinyfleet.window_end())
BLOCKED = ("/api/v1/read", "/api/v1/export")


@pytest.fixture
def promql_only(metrics_servers: ServerPool, tiny_openmetrics: Path) -> Iterator[str]:
    """A PromQL-only proxy in front of the tiny fleet's Prometheus; yields its URL."""
    upstream = metrics_servers.prometheus(tiny_openmetrics).url

    class Proxy(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            if self.path.split("?")[0] in BLOCKED:
                self.send_response(404)
                self.end_headers()
                self.wfile.write(b"404 page not found\n")
                return
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else None
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type",)}
            answer = requests.request(self.command, upstream + self.path, data=body, headers=headers, timeout=30)
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _read(url: str, path: str) -> tuple[str, list[object]]:
    with PrometheusCollector(url, tiny_settings(read_path=path),
                             now=lambda: WINDOW.end + timedelta(hours=1)) as collector:
        chunks = list(collector.iter_chunks(WINDOW))
        return collector.choose_read_path(), [c.frames["gpu_samples"] for c in chunks]


def test_auto_falls_back_to_query_range_where_no_bulk_read_is_served(
        promql_only: str, metrics_servers: ServerPool, tiny_openmetrics: Path) -> None:
    kind, frames = _read(promql_only, "auto")
    assert kind == "query_range"
    direct_kind, direct = _read(metrics_servers.prometheus(tiny_openmetrics).url, "query_range")
    assert direct_kind == "query_range"
    assert len(frames) == len(direct) and sum(f.height for f in frames) > 0
    assert all(a.equals(b) for a, b in zip(frames, direct, strict=True))


def test_auto_finds_each_engines_bulk_read(metrics_servers: ServerPool, tiny_openmetrics: Path) -> None:
    assert _read(metrics_servers.prometheus(tiny_openmetrics).url, "auto")[0] == "remote_read"
    assert _read(metrics_servers.victoriametrics(tiny_openmetrics).url, "auto")[0] == "export"


@pytest.mark.parametrize("engine, path", [
    ("proxy", "remote_read"), ("proxy", "export"), ("prometheus", "export"), ("victoriametrics", "remote_read"),
])
def test_forced_path_not_served_is_one_clear_error(
        promql_only: str, metrics_servers: ServerPool, tiny_openmetrics: Path, engine: str, path: str) -> None:
    url = {"proxy": promql_only, "prometheus": metrics_servers.prometheus(tiny_openmetrics).url,
           "victoriametrics": metrics_servers.victoriametrics(tiny_openmetrics).url}[engine]
    with pytest.raises(SourceError, match=f"read_path is {path} but the engine does not") as error:
        _read(url, path)
    assert "\n" not in str(error.value) and "use auto or query_range" in str(error.value)
