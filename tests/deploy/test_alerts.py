"""The alert rules: promtool checks and unit tests, and one alert end to end.

- `promtool check rules` on the plain rules file (the chart's PrometheusRule embeds the same);
- `promtool test rules tests/deploy/rules_test.yaml`: for each alert, cases that fire and cases
  that do not (per-team thresholds, `for:` durations, other sources/statuses, day 1 vs day 2),
  the self-monitoring ones included (target missing, scrape down, no cost series, stale
  snapshot: each fires, and none fires on a healthy target);
- every alert links its runbook: a `runbook_url` whose anchor is a section of
  docs/guide/runbooks.md (GitHub's anchor of a `## Name` heading is the lower-cased name);
- a mutated copy of a threshold comparison makes those unit tests fail (they test the numbers);
- end to end: a real Prometheus scrapes the production server (vision is over its budget in
  the settings), evaluates the rules and sends the firing GpuledgerBudgetExceeded to Debian's
  prometheus-alertmanager, which delivers it to a local webhook receiver.
"""

from __future__ import annotations

import queue
import subprocess
import time
from pathlib import Path

import pytest

from tests.deploy.chart import RULES

HERE = Path(__file__).resolve().parent
PLAIN = HERE.parents[1] / "deploy" / "prometheus" / "gpuledger-rules.yaml"


def promtool(*args: str, cwd: Path = HERE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=120)


def test_promtool_check_rules():
    done = promtool("check", "rules", str(PLAIN))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout


def test_promtool_unit_tests_pass():
    done = promtool("test", "rules", "rules_test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_runbook_section_and_a_unit_test():
    import yaml

    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    runbooks = (HERE.parents[1] / "docs" / "guide" / "runbooks.md").read_text()
    sections = {line[3:].strip().lower() for line in runbooks.splitlines() if line.startswith("## ")}
    tested = (HERE / "rules_test.yaml").read_text()
    assert len(rules) == 10
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        page, anchor = url.split("#")
        assert page == "https://github.com/gpuledger/gpuledger/blob/main/docs/guide/runbooks.md"
        assert anchor == rule["alert"].lower() and anchor in sections, rule["alert"]
        assert f"alertname: {rule['alert']}" in tested, f"{rule['alert']}: no promtool case"


def test_unit_tests_catch_a_changed_threshold(tmp_path):
    (tmp_path / "rules").mkdir()
    # The warning compared against the critical threshold instead: nlp (85 %) must go missing.
    mutated = RULES.read_text().replace('gpuledger_budget_threshold_ratio{level="warning"}',
                                        'gpuledger_budget_threshold_ratio{level="critical"}')
    assert mutated != RULES.read_text()
    copy = tmp_path / "rules" / "gpuledger-rules.yaml"
    copy.write_text(mutated)
    tests = (HERE / "rules_test.yaml").read_text().replace(
        "../../deploy/helm/gpuledger/files/gpuledger-rules.yaml", str(copy))
    (tmp_path / "rules_test.yaml").write_text(tests)
    done = promtool("test", "rules", "rules_test.yaml", cwd=tmp_path)
    assert done.returncode != 0 and "GpuledgerBudgetWarning" in done.stdout + done.stderr


def test_budget_alert_reaches_the_webhook_through_alertmanager(monitoring, hook):
    """Alertmanager groups by alertname and team: one notification per team over budget."""
    deadline = time.monotonic() + 180
    exceeded: dict[str, dict] = {}
    while "vision" not in exceeded:
        try:
            payload = hook.received.get(timeout=max(1.0, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail("no vision notification from Alertmanager within 180 s: "
                        + monitoring.alertmanager.log_tail() + monitoring.prometheus.log_tail())
        assert payload["status"] == "firing" and payload["receiver"] == "hook"
        for alert in payload["alerts"]:
            if alert["labels"]["alertname"] == "GpuledgerBudgetExceeded":
                exceeded[alert["labels"]["team"]] = alert
    assert "nlp" not in exceeded  # nlp is at a few percent of its budget
    vision = exceeded["vision"]
    assert vision["labels"]["severity"] == "critical" and vision["labels"]["month"] == "2026-11"
    assert vision["annotations"]["summary"].startswith("Team vision is over its 2026-11 GPU budget")
    firing = {a["metric"]["team"] for a in monitoring.query('ALERTS{alertname="GpuledgerBudgetExceeded"}')}
    assert firing == {"vision", "ads"}  # ads: a zero budget with spending
