"""Fixtures: a demo warehouse served by the production server (gunicorn, as `gpuledger serve`
runs it) and a real Prometheus scraping its ops port, with gpuledger's alert rules loaded and
a real Alertmanager (Debian's prometheus-alertmanager) it sends alerts to."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml

from tests.dashboards.conftest import build_demo_warehouse
from tests.deploy.chart import RULES
from tools.metrics_servers import MetricsServer, free_port

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = {"nlp": 400.0, "vision": 10.0, "ads": 0.0}
"""nlp well under budget, vision far over it, ads with a zero budget."""
TEAM_THRESHOLDS = {"nlp": [0.01, 1.5]}
"""nlp's own thresholds (`finance.team_thresholds`): a warning at 1 % (it uses a few percent),
the critical level at 150 %; the others keep the defaults (80 %, 100 %)."""
SECRET = "Bearer sup3r-s3cret-prometheus-t0ken"


def settings_yaml(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "prometheus": {"url": "http://127.0.0.1:1", "auth_header": SECRET},
        "access": {"proxy_addresses": ["127.0.0.1"],
                   "roles": [{"subject": "ada", "kind": "user", "role": "admin"},
                             {"subject": "leo", "kind": "user", "role": "lead", "team": "nlp"}]},
        "teams": {"budgets": BUDGETS},
        "finance": {"team_thresholds": TEAM_THRESHOLDS},
    }))
    return path


@dataclass
class Served:
    server: MetricsServer
    port: int
    tmp: Path
    warehouse: Path
    config: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ops_url(self) -> str:
        return self.server.url


def serve(root: Path, warehouse: Path, fmt: str = "json", level: str = "info",
          extra: Sequence[str] = ()) -> Served:
    """`gpuledger serve` (gunicorn) on a copy of `warehouse`, its private snapshots under its own
    TMPDIR, as the chart runs it; ready once /readyz on the ops port says 200."""
    root.mkdir(parents=True, exist_ok=True)
    copy = root / "warehouse.duckdb"
    shutil.copyfile(warehouse, copy)
    tmp = root / "tmp"
    tmp.mkdir()
    config = settings_yaml(root / "gpuledger.yaml")
    port, ops = free_port(), free_port()
    argv = ["env", f"TMPDIR={tmp}", sys.executable, "-m", "gpuledger", "--config", str(config),
            "--warehouse", str(copy), "serve", "--host", "127.0.0.1", f"--port={port}",
            f"--metrics-port={ops}", f"--log-format={fmt}", f"--log-level={level}", "--refresh-s=2", *extra]
    data = root / "served"
    data.mkdir()
    server = MetricsServer("gpuledger", argv, ops, data, "/readyz").start()
    return Served(server, port, tmp, copy, config)


@pytest.fixture(scope="session")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_warehouse(tmp_path_factory.mktemp("ops-demo") / "demo.duckdb", gpus=16)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory, demo_warehouse: Path) -> Iterator[Served]:
    """One server for the metrics, dashboard-query and alert tests (read-only for them)."""
    from gpuledger.core import collect_stats

    app = serve(tmp_path_factory.mktemp("served"), demo_warehouse)
    collect_stats.add(app.warehouse, {"clock_skew": 2})  # what a collection left beside it
    yield app
    app.server.stop()


@dataclass
class Monitoring:
    prometheus: MetricsServer
    alertmanager: MetricsServer
    hook_port: int

    def query(self, expr: str) -> list[dict]:
        answer = requests.get(self.prometheus.url + "/api/v1/query", params={"query": expr}, timeout=30)
        body = answer.json()
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]


def fast_rules(target: Path) -> Path:
    """The real rules with `for:` cut to 0 s, so the end-to-end alert fires within seconds
    (the `for` durations themselves are covered by promtool test rules)."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    target.write_text(yaml.safe_dump(rules))
    return target


def start_alertmanager(root: Path, hook_url: str) -> MetricsServer:
    config = root / "alertmanager.yml"
    config.write_text(yaml.safe_dump({
        "route": {"receiver": "hook", "group_by": ["alertname", "team"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": hook_url, "send_resolved": False}]}],
    }))
    port = free_port()
    data = root / "am-data"
    data.mkdir()
    argv = ["prometheus-alertmanager", f"--config.file={config}", f"--storage.path={data}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]
    return MetricsServer("alertmanager", argv, port, data, "/-/ready").start()


def start_prometheus(root: Path, target: str, alertmanager: str, rules: Path) -> MetricsServer:
    config = root / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [{"job_name": "gpuledger", "static_configs": [{"targets": [target]}]}],
    }))
    port = free_port()
    data = root / "prom-data"
    data.mkdir()
    argv = ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    return MetricsServer("prometheus", argv, port, data, "/-/ready").start()


class Hook:
    """A local webhook receiver: every POST body Alertmanager sends lands in `received`."""

    def __init__(self) -> None:
        import json
        import queue
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: queue.Queue[dict] = queue.Queue()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                received.put(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def hook() -> Iterator[Hook]:
    receiver = Hook()
    yield receiver
    receiver.close()


@pytest.fixture(scope="session")
def monitoring(tmp_path_factory: pytest.TempPathFactory, served: Served, hook: Hook) -> Iterator[Monitoring]:
    for binary in ("prometheus", "prometheus-alertmanager"):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is not installed (Debian package; .ci/run installs it)")
    root = tmp_path_factory.mktemp("monitoring")
    am = start_alertmanager(root, hook.url)
    rules = fast_rules(root / "rules.yaml")
    prom = start_prometheus(root, f"127.0.0.1:{served.server.port}", f"127.0.0.1:{am.port}", rules)
    mon = Monitoring(prom, am, 0)
    try:
        wait_for_series(mon, "gpuledger_cost")
        yield mon
    finally:
        prom.stop()
        am.stop()


def wait_for_series(mon: Monitoring, expr: str, timeout_s: float = 120.0) -> None:
    """Until the first scrape with the ledger's metrics is stored (a steady state: it stays)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if mon.query(f"count({expr})"):
            return
        time.sleep(0.5)
    pytest.fail(f"{expr}: not scraped within {timeout_s:g}s")
