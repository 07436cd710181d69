"""The production server (gunicorn): probes, 404s, who may read /metrics, SIGTERM, JSON logs.

SIGTERM (what the kubelet sends a pod's PID 1): a request in flight when the signal arrives is
still answered, the server exits 0, and every private snapshot it took is deleted. Nothing here
waits on a clock: the test follows the server's own log (its "start" record for the request,
gunicorn's "Handling signal: term") to know where the server is.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest
import requests

from tests.deploy.conftest import SECRET, serve

ADA = {"X-Forwarded-User": "ada"}
LEO = {"X-Forwarded-User": "leo"}


def snapshots(tmp: Path) -> list[Path]:
    return [p for p in tmp.rglob("*") if p.is_file()]


def test_probes_404_and_metrics_access(served):
    ops, app = served.ops_url, served.url
    assert requests.get(ops + "/healthz", timeout=10).status_code == 200
    ready = requests.get(ops + "/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["ready"] is True
    for path in ("/metrics/x", "/wp-login.php", "/team/extra", "/download"):
        answer = requests.get(app + path, headers=ADA, timeout=10)
        assert answer.status_code == 404, path
        assert "<html" not in answer.text.lower()
    page = requests.get(app + "/fleet", headers=ADA, timeout=30)
    assert page.status_code == 200 and "<html" in page.text.lower()
    # The ops port serves the probes and the metrics only, to anyone.
    assert requests.get(ops + "/fleet", headers=ADA, timeout=10).status_code == 404
    assert requests.get(ops + "/download/bill.csv", headers=ADA, timeout=10).status_code == 404
    assert requests.get(ops + "/metrics", timeout=10).status_code == 200
    # The app's port: every team's cost is for admins and viewers only.
    assert requests.get(app + "/metrics", timeout=10).status_code == 401
    assert requests.get(app + "/metrics", headers=LEO, timeout=10).status_code == 403
    metrics = requests.get(app + "/metrics", headers=ADA, timeout=10)
    assert metrics.status_code == 200 and "gpuledger_cost{" in metrics.text


class LogFollower:
    """Reads the server's log file as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines: list[str] = []

    def wait_for(self, predicate, timeout_s: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.path.open() as handle:
                handle.seek(self.offset)
                chunk = handle.read()
                self.offset = handle.tell()
            for line in chunk.splitlines():
                self.lines.append(line)
                record = json.loads(line)
                if predicate(record):
                    return record
            time.sleep(0.05)
        pytest.fail(f"log of {self.path}: no matching record in {timeout_s:g}s")


def _request(path: str, body_length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-User: ada\r\n"
            f"Content-Type: application/json\r\nContent-Length: {body_length}\r\n\r\n").encode()


def test_sigterm_finishes_the_request_in_flight_and_deletes_every_snapshot(tmp_path, demo_warehouse):
    app = serve(tmp_path / "sigterm", demo_warehouse, fmt="json", level="debug")
    log = LogFollower(app.server.log_path)
    try:
        assert snapshots(app.tmp), "the server serves from a snapshot of its own"
        proc = app.server.process
        assert proc is not None
        body = json.dumps({"output": "page.children", "outputs": {"id": "page", "property": "children"},
                           "inputs": [], "changedPropIds": []}).encode()
        with socket.create_connection(("127.0.0.1", app.port), timeout=60) as sock:
            sock.sendall(_request("/_dash-update-component", len(body)) + body[:10])
            log.wait_for(lambda r: r.get("event") == "start" and r.get("path") == "/_dash-update-component")
            os.kill(proc.pid, signal.SIGTERM)  # to the master, as the kubelet signals PID 1
            log.wait_for(lambda r: "Handling signal: term" in r["msg"])
            sock.sendall(body[10:])
            answer = sock.recv(65536).decode(errors="replace")
        status = int(answer.split(" ", 2)[1])
        assert answer.startswith("HTTP/1.1 ") and status != 503
        assert proc.wait(timeout=90) == 0
        assert snapshots(app.tmp) == []
        log.wait_for(lambda r: r["msg"] == "stopped: snapshots deleted")
    finally:
        app.server.stop()


def test_json_logs_never_carry_a_secret(served):
    token = SECRET.split(" ", 1)[1]
    requests.get(served.url + f"/{token}", headers=ADA, timeout=10)
    requests.get(served.url + f"/team?token={token}", headers=ADA, timeout=30)
    requests.get(served.ops_url + "/healthz", timeout=10)
    text = served.server.log_path.read_text()
    assert token not in text and "sup3r" not in text
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    requests_logged = [r for r in records if r["logger"] == "gpuledger.http"]
    assert {"ts", "level", "logger", "msg", "method", "path", "status", "duration_ms"} <= set(requests_logged[-1])
    masked = [r for r in requests_logged if r["status"] == 404 and r["path"] != f"/{token}"]
    assert any("***" in r["path"] or "REDACTED" in r["path"].upper() for r in masked), masked[-3:]
    team = [r for r in requests_logged if r["route"] == "/team"]
    assert team and all("token" not in r["path"] for r in team)  # no query strings in logs
    assert any(r["logger"] == "gunicorn.error" for r in records)  # the server's own lines too


DEV_SERVER = """
import sys, tempfile
tempfile.tempdir = sys.argv[3]
from gpuledger.core.config import load_settings
from gpuledger.dashboards.app import serve
serve(load_settings(__import__("pathlib").Path(sys.argv[1])), sys.argv[2], "127.0.0.1", int(sys.argv[4]),
      refresh_s=2.0)
"""


def test_sigterm_also_cleans_up_the_in_process_server(tmp_path, demo_warehouse):
    """`dashboards.app.serve` (what `gpuledger demo` ends with) stops on SIGTERM like on Ctrl-C."""
    import shutil
    import sys

    from tests.deploy.conftest import settings_yaml
    from tools.metrics_servers import MetricsServer, free_port

    (tmp_path / "tmp").mkdir()
    warehouse = tmp_path / "w.duckdb"
    shutil.copyfile(demo_warehouse, warehouse)
    port = free_port()
    argv = [sys.executable, "-c", DEV_SERVER, str(settings_yaml(tmp_path / "g.yaml")), str(warehouse),
            str(tmp_path / "tmp"), str(port)]
    (tmp_path / "data").mkdir()
    server = MetricsServer("dev-server", argv, port, tmp_path / "data", "/readyz").start()
    try:
        assert snapshots(tmp_path / "tmp")
        proc = server.process
        assert proc is not None
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
        assert snapshots(tmp_path / "tmp") == []
    finally:
        server.stop()
