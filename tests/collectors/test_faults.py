"""Faults: the collector fails clearly and the next run finishes the window exactly once.

Cases:
- Prometheus stops in the middle of a range: the run raises SourceError naming the engine
  and the query; the watermark stays at a chunk boundary; after a restart the next run
  resumes there and the warehouse equals the fleet's truth (nothing lost or doubled);
- `kill -9` while a load transaction is open (a subprocess whose warehouse pauses inside the
  write): the file keeps the last committed chunk; `gpuledger collect` then completes the
  window exactly once;
- a bad PromQL query: HTTP 400 from real Prometheus, one line naming the query, sent once;
- retries: a 5xx answer is retried exactly `retries` times, a 4xx never (counted by a
  stub HTTP server standing in for a failing proxy in front of the engine);
- the configured Authorization header is sent and appears in no error message;
- the CLI prints one line and exits non-zero when the engine cannot be reached.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.collect_pipeline import collect_window, resume_point
from gpuledger.collectors.prom_http import PromHttp
from gpuledger.core.config import PrometheusSettings
from gpuledger.core.errors import SourceError
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.collectors import tinyfleet
from tests.collectors.conftest import tiny_settings
from tools.metrics_servers import ServerPool

WINDOW = Window(tinyfleet.T0, tinyfleet.window_end())
NOW = tinyfleet.window_end() + timedelta(minutes=5)
pytestmark = pytest.mark.prometheus


def _exactly_once(wh: Warehouse) -> None:
    per_instant = wh.query("SELECT ts, count(*) AS n FROM gpu_samples GROUP BY ts")
    assert per_instant.height == tinyfleet.MINUTES
    assert set(per_instant["n"].to_list()) == {4}
    assert wh.count("token_samples") == tinyfleet.MINUTES
    held = wh.scalar("SELECT count(*) FROM gpu_samples WHERE uuid = 'GPU-a0' AND pod = 'train-1'")
    assert held == 90


def test_prometheus_stopped_mid_range(prometheus_factory: ServerPool, tiny_openmetrics: Path,
                                      tmp_path: Path) -> None:
    server = prometheus_factory.prometheus(tiny_openmetrics)
    # Six 30-minute chunks. The pipeline holds at most three chunks past the one being loaded
    # (one handed over, one built, one in flight), so when the first chunk's load stops the
    # server, the fifth chunk's queries are sent only after the server has exited: the run
    # must fail however fast the machine fetches (with 1h chunks, all three could be fetched
    # before the first load finished, and the run then ended without an error).
    settings = tiny_settings(retries=1, chunk="30m")
    chunk = timedelta(minutes=30)

    def stop_after_first(data: object) -> None:
        if server.running:
            server.stop()

    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        with pytest.raises(SourceError) as failure:
            collect_window(wh, settings, server.url, WINDOW, on_chunk=stop_after_first,
                           now=lambda: NOW, backoff_s=0.01)
        message = str(failure.value)
        # A query already in flight meets Prometheus shutting down: 503, or 422 "block is
        # closing" from its query engine; later ones are refused. Whichever it meets, the one
        # line names the engine and the query.
        gone = "cannot reach" in message or "HTTP 503" in message or "block is closing" in message
        assert server.url in message and gone and "query" in message
        mark = resume_point(wh)
        assert mark in {tinyfleet.T0 + k * chunk for k in range(1, 5)}
        assert wh.scalar("SELECT max(ts) FROM gpu_samples") == mark - timedelta(minutes=1)
        server.start()
        report = collect_window(wh, settings, server.url, WINDOW, now=lambda: NOW)
        assert report.start == mark
        _exactly_once(wh)


KILLED_RUN = textwrap.dedent("""
    import sys, time
    from datetime import datetime
    from gpuledger.core.config import Settings
    from gpuledger.core.window import Window
    from gpuledger.collect_pipeline import collect_window
    from gpuledger.warehouse import Warehouse

    class SlowWarehouse(Warehouse):
        loads = 0
        def _write(self, spec, frame, window):
            removed = super()._write(spec, frame, window)
            if spec.name == "gpu_samples":
                SlowWarehouse.loads += 1
                if SlowWarehouse.loads == 2:
                    print("inside-load", flush=True)
                    time.sleep(60)
            return removed

    url, path, start, end = sys.argv[1:5]
    wh = SlowWarehouse.open(path)
    settings = Settings(prometheus={"chunk": "1h"})
    window = Window(datetime.fromisoformat(start), datetime.fromisoformat(end))
    collect_window(wh, settings, url, window, now=lambda: window.end)
""")


def test_kill_9_during_load_then_rerun_completes_once(metrics_servers: ServerPool, tiny_openmetrics: Path,
                                                      tmp_path: Path) -> None:
    server = metrics_servers.prometheus(tiny_openmetrics)
    path = tmp_path / "w.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, server.url, str(path), WINDOW.start.isoformat(), WINDOW.end.isoformat()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "inside-load", proc.stderr.read() if proc.stderr else ""
        proc.kill()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    with Warehouse.open(path) as wh:
        # the first chunk committed; the second died inside its transaction
        assert resume_point(wh) == tinyfleet.T0 + timedelta(hours=1)
        assert wh.scalar("SELECT max(ts) FROM gpu_samples") == tinyfleet.T0 + timedelta(minutes=59)
    config = tmp_path / "gpuledger.yaml"
    config.write_text("prometheus:\n  chunk: 1h\n")
    code = main(["--config", str(config), "--warehouse", str(path), "collect", "--prometheus", server.url,
                 "--start", WINDOW.start.isoformat(), "--end", WINDOW.end.isoformat(), "--step", "60s"])
    assert code == 0
    with Warehouse.open(path) as wh:
        _exactly_once(wh)


def test_bad_query_is_one_clear_error(metrics_servers: ServerPool, tiny_openmetrics: Path) -> None:
    server = metrics_servers.prometheus(tiny_openmetrics)
    http = PromHttp(server.url, PrometheusSettings(retries=3))
    try:
        with pytest.raises(SourceError) as failure:
            http.query_range("rate(DCGM_FI_DEV_GPU_UTIL[5m]", WINDOW.start, WINDOW.end, 60)
    finally:
        http.close()
    message = str(failure.value)
    assert "rate(DCGM_FI_DEV_GPU_UTIL[5m]" in message and "HTTP 400" in message
    assert "\n" not in message
    assert http.requests_sent == 1


class _Stub(http.server.BaseHTTPRequestHandler):
    status = 503
    hits = 0
    auth: str | None = None

    def do_POST(self) -> None:
        type(self).hits += 1
        type(self).auth = self.headers.get("Authorization")
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"status":"error","errorType":"unavailable","error":"overloaded"}'
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = type("Handler", (_Stub,), {"hits": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("status", "expected_hits"), [(503, 3), (422, 1), (400, 1)])
def test_retries_5xx_only(stub: tuple[str, type[_Stub]], status: int, expected_hits: int) -> None:
    url, handler = stub
    handler.status = status
    http = PromHttp(url, PrometheusSettings(retries=2, timeout_s=5), backoff_s=0.01)
    try:
        with pytest.raises(SourceError, match=f"query 'up'.*HTTP {status}"):
            http.query_range("up", WINDOW.start, WINDOW.end, 60)
    finally:
        http.close()
    assert handler.hits == expected_hits


def test_auth_header_sent_never_shown(stub: tuple[str, type[_Stub]]) -> None:
    url, handler = stub
    handler.status = 401
    secret = "Bearer s3cr3t-token"
    settings = PrometheusSettings.model_validate({"auth_header": secret, "retries": 2})
    http = PromHttp(url, settings, backoff_s=0.01)
    try:
        with pytest.raises(SourceError) as failure:
            http.query_range("up", WINDOW.start, WINDOW.end, 60)
    finally:
        http.close()
    assert handler.auth == secret and handler.hits == 1
    assert "s3cr3t" not in str(failure.value) and "s3cr3t" not in repr(settings)


def test_cli_unreachable_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("prometheus:\n  retries: 0\n")
    code = main(["--config", str(config), "--warehouse", str(tmp_path / "w.duckdb"), "collect",
                 "--prometheus", "http://127.0.0.1:9", "--start", "2026-01-01", "--end", "2026-01-02"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "cannot reach" in err[0] and "127.0.0.1:9" in err[0]
