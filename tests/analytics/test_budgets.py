"""Budgets that act: status, forecast, thresholds, the alert rules (real promtool) and the webhook.

Cases (a hand-built November: two H100s at 3.00/h, held for the first 3 days of 30):
- used = 72 h x 3.00 = 216.00 per team; seen on day 3 the month-end forecast at that pace is
  ten times that (3 of 30 days), within the minute the newest sample lags; once the month is
  over the forecast is the cost itself; left = budget - used;
- thresholds: the team's own (`finance.team_thresholds`) replace the fleet's; the highest
  crossed is reported, `over` from 100 %; a team without a budget is `no_budget`;
- `budget_gauges` (per-team thresholds included) fed to Prometheus' own rule tester
  (`promtool test rules`) against the chart's rules (`deploy/helm/gpuledger/files/
  gpuledger-rules.yaml`): the warning fires for the team at its own first threshold (10 %),
  the critical one for the team over budget, nothing for a team under every threshold;
- the webhook POSTs JSON with a Slack `text` and the alert records to a real local HTTP server;
  a refused POST names the host, never the URL (its token).
"""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from gpuledger.analytics.billing.budgets import alerts, budget_gauges, budget_status
from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.period import Period
from gpuledger.reports.budget_alerts import payload, post
from tests.analytics.builders import Seg, at, gpus, namespaces, samples

RULES = Path(__file__).parents[2] / "deploy" / "helm" / "gpuledger" / "files" / "gpuledger-rules.yaml"
RUNBOOKS = "https://github.com/gpuledger/gpuledger/blob/main/docs/guide/runbooks.md"
SETTINGS = Settings(
    teams={"budgets": {"vision": 2000.0, "nlp": 100.0, "speech": 10_000.0}},
    finance={"team_thresholds": {"vision": [0.1, 0.9]}},
)


@pytest.fixture(scope="module")
def status(tmp_path_factory: pytest.TempPathFactory):
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.warehouse import Warehouse
    from tests.analytics.builders import load

    month = Period.exact("2026-11").window
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}, {"uuid": "GPU-2", "gpu_index": 1}),
        "gpu_samples": samples([Seg("GPU-1", at(0), at(72), "cv", "p1", act=0.5),
                                Seg("GPU-2", at(0), at(72), "lm", "p2", act=0.5)]),
        "namespaces": namespaces({"cv": "vision", "lm": "nlp"}),
    }
    path = load(tmp_path_factory.mktemp("budgets") / "w.duckdb", month, frames)
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, month, SETTINGS, ("team",))
    assert budget_status(bill, SETTINGS)["forecast"].to_list() == budget_status(bill, SETTINGS)["used"].to_list()
    return budget_status(bill, SETTINGS, now=at(72))  # the month is over today: forecast = cost


def _row(status, team: str) -> dict:
    return status.filter(status["team"] == team).row(0, named=True)


def test_used_left_forecast(status) -> None:
    vision = _row(status, "vision")
    assert vision["used"] == pytest.approx(216.00, abs=0.005)
    assert vision["left"] == pytest.approx(2000 - 216.00, abs=0.005)
    assert vision["forecast"] == pytest.approx(2160.0, rel=0.001)  # 3 of 30 days -> x 10
    assert vision["used_ratio"] == pytest.approx(0.108, abs=1e-4)


def test_thresholds(status) -> None:
    vision, nlp = _row(status, "vision"), _row(status, "nlp")
    assert vision["threshold"] == 0.1 and vision["state"] == "warning"  # its own thresholds
    assert vision["forecast_threshold"] == 0.9
    assert nlp["threshold"] == 1.0 and nlp["state"] == "over"
    speech = _row(status, "speech")
    assert speech["threshold"] is None and speech["state"] == "ok" and speech["used"] == 0
    assert {a["team"]: a["severity"] for a in alerts(status, "USD")} == {"vision": "warning", "nlp": "critical"}


def test_alert_rules_with_promtool(status, tmp_path: Path) -> None:
    series = []
    gauges = budget_gauges(status, SETTINGS)
    assert {(lb["team"], lb["level"]): v for lb, v in gauges["gpuledger_budget_threshold_ratio"]} == {
        ("vision", "warning"): 0.1, ("nlp", "warning"): 0.8, ("nlp", "critical"): 1.0,
        ("speech", "warning"): 0.8, ("speech", "critical"): 1.0}  # vision: no threshold at 100 %
    for name, samples_ in gauges.items():
        for labels, value in samples_:
            extra = "" if "level" in labels else ',month="2026-11"'  # as /metrics labels them
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            series.append({"series": f"{name}{{{text}{extra}}}", "values": f"{value}x40"})
    test = {
        "rule_files": [str(RULES)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "20m", "alertname": "GpuledgerBudgetWarning", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "team": "vision", "month": "2026-11"},
                 "exp_annotations": {
                     "summary": "Team vision used 10.8% of its 2026-11 GPU budget",
                     "description": "Month-to-date GPU cost of team vision is past its warning "
                                    "threshold (finance.budget_thresholds).",
                     "runbook_url": RUNBOOKS + "#gpuledgerbudgetwarning"}}]},
            {"eval_time": "20m", "alertname": "GpuledgerBudgetExceeded", "exp_alerts": [
                {"exp_labels": {"severity": "critical", "team": "nlp", "month": "2026-11"},
                 "exp_annotations": {
                     "summary": "Team nlp is over its 2026-11 GPU budget (216%)",
                     "description": "Month-to-date GPU cost of team nlp exceeds teams.budgets.",
                     "runbook_url": RUNBOOKS + "#gpuledgerbudgetexceeded"}}]},
        ]}],
    }
    path = tmp_path / "budget-rules-test.yaml"
    path.write_text(yaml.safe_dump(test))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


class _Sink(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict]] = []
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).bodies.append({"type": self.headers["Content-Type"],
                                  "json": json.loads(self.rfile.read(length))})
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_webhook(status) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/hooks/T000/SECRET-TOKEN"
    try:
        body = payload(alerts(status, "USD"), "2026-11")
        assert post(url, body) == 200
        sent = _Sink.bodies[-1]
        assert sent["type"] == "application/json"
        assert "nlp used 216% of its 100.00 USD budget" in sent["json"]["text"]
        assert [a["team"] for a in sent["json"]["alerts"]] == ["nlp", "vision"]
        _Sink.status = 403
        with pytest.raises(ReportError) as refused:
            post(url, body)
        assert "127.0.0.1" in str(refused.value) and "SECRET-TOKEN" not in str(refused.value)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
