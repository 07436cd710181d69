"""The monitoring mixin (tools/mixin): rules and dashboard from one source, current, and linted.

- the generated files in the repository are what `python -m tools.mixin` writes (as the
  kustomize files are the chart's), and the plain-install paths link to them;
- lint: every series a rule or a panel reads is one the production server's /metrics publishes
  (scraped here from the demo warehouse), so a renamed metric fails here, not in a blank panel;
- the chart's dashboard ConfigMap carries the dashboard with the `currency` value as its unit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.chart import CHART, RULES, one, run_helm

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = CHART / "files" / "gpuledger-dashboard.json"


def test_generated_files_are_current():
    done = subprocess.run([sys.executable, "-m", "tools.mixin", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (ROOT / "deploy" / "grafana" / "gpuledger.json").resolve() == DASHBOARD
    assert (ROOT / "deploy" / "prometheus" / "gpuledger-rules.yaml").resolve() == RULES


def test_a_stale_file_is_reported(tmp_path, monkeypatch):
    from tools.mixin import files

    copy = tmp_path / "rules.yaml"
    copy.write_text(RULES.read_text().replace("for: 15m", "for: 16m", 1))
    monkeypatch.setattr(files, "RULES", copy)
    assert files.stale() == [copy]


def _series_read(rules_text: str, board_text: str) -> dict[str, set[str]]:
    """Metric names (gpuledger_* and up) in every rule and panel expression, by where they are."""
    rules = yaml.safe_load(rules_text)
    exprs = {f"rule {r['alert']}": r["expr"] for g in rules["groups"] for r in g["rules"]}
    board = json.loads(board_text)
    exprs |= {f"panel {p['title']}/{t['refId']}": t["expr"] for p in board["panels"] for t in p["targets"]}
    exprs |= {f"variable {v['name']}": v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"}
    return {where: set(re.findall(r"\b(gpuledger_\w+|up)\b", expr)) for where, expr in exprs.items()}


def _unpublished(read: dict[str, set[str]], published: set[str]) -> dict[str, list[str]]:
    """Where a rule, panel or variable reads a series /metrics does not publish (or none at all)."""
    return {where: sorted(names - published) or ["(no series)"] for where, names in read.items()
            if not names or names - published}


def _published(served) -> set[str]:
    text = requests.get(served.ops_url + "/metrics", timeout=30).text
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples} | {"up"}
    # Published only while a plan is moving (none in the demo): dashboards/metrics.py names it.
    return names | {"gpuledger_plan_updated_timestamp_seconds"}


def test_every_series_read_is_published(served):
    read = _series_read(RULES.read_text(), DASHBOARD.read_text())
    assert len(read) >= 20
    assert _unpublished(read, _published(served)) == {}


def test_the_lint_catches_a_renamed_series(served):
    renamed = RULES.read_text().replace("gpuledger_snapshot_age_seconds", "gpuledger_snapshot_age")
    found = _unpublished(_series_read(renamed, DASHBOARD.read_text()), _published(served))
    assert found == {"rule GpuledgerSnapshotStale": ["gpuledger_snapshot_age"]}


def test_rules_file_is_the_sources_data():
    from tools.mixin import rules

    assert yaml.safe_load(RULES.read_text()) == rules.as_data()


def test_chart_dashboard_configmap_uses_the_currency_value():
    done = run_helm("template", "gpuledger", str(CHART), "--namespace", "gpuledger",
                    "--set", "grafanaDashboard.enabled=true", "--set", "currency=EUR")
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    config = one(docs, "ConfigMap", "gpuledger-grafana-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(config["data"]["gpuledger.json"])
    units = {p["fieldConfig"]["defaults"].get("unit") for p in board["panels"]}
    assert "currencyEUR" in units and not any(u and "VAR_" in u for u in units)
    assert board["uid"] == json.loads(DASHBOARD.read_text())["uid"]
    off = run_helm("template", "gpuledger", str(CHART))
    assert "grafana-dashboard" not in off.stdout  # off by default
