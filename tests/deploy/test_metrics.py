"""/metrics of the production server, scraped by a real Prometheus, equals the bill.

The demo warehouse (16 cards, 2026-10-31 18:00 to 2026-11-01 12:00 UTC) is served by gunicorn;
Prometheus scrapes its ops port every second. What Prometheus stores is checked against numbers
computed here from the warehouse file itself: the bill (`compute_bill`), the budgets in the
settings, the newest sample read with SQL, the plans' savings.
"""

from __future__ import annotations

import duckdb
import pytest
import requests

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.core.config import load_settings
from gpuledger.core.period import Period
from gpuledger.warehouse import Warehouse
from tests.deploy.conftest import BUDGETS

CURRENT, PREVIOUS = "2026-11", "2026-10"


@pytest.fixture(scope="module")
def bills(served):
    settings = load_settings(served.config)
    out = {}
    with Warehouse.open(served.warehouse, read_only=True) as wh:
        for month in (CURRENT, PREVIOUS):
            window = Period.exact(month).window
            out[month, "team"] = compute_bill(wh, window, settings, by=("team",))
            out[month, "fine"] = compute_bill(wh, window, settings, by=("team", "model", "sharing_mode"))
    return out


def _by(result: list[dict], *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in result}


def test_cost_per_team_model_and_mode_is_the_bill(monitoring, bills):
    for which, month in (("current", CURRENT), ("previous", PREVIOUS)):
        fine = bills[month, "fine"].lines
        stored = _by(monitoring.query(f'gpuledger_cost{{period="{which}",month="{month}"}}'),
                     "team", "model", "sharing_mode")
        expected = {(r["team"], r["model"] or "", r["sharing_mode"] or "exclusive"): r["cost"]
                    for r in fine.iter_rows(named=True)}
        assert stored == pytest.approx(expected, abs=1e-9)
        idle = _by(monitoring.query(f'gpuledger_idle_cost{{period="{which}"}}'), "team", "model", "sharing_mode")
        assert sum(idle.values()) == pytest.approx(float(fine["idle_cost"].sum()), abs=1e-6)
        assert sum(idle.values()) > 0


def test_per_team_cost_equals_the_team_bill(monitoring, bills):
    """`sum by (team)` in PromQL against the bill by team: the same to the cent per line, the
    fleet total exactly (both apportion the fleet cost to the cent)."""
    for which, month in (("current", CURRENT), ("previous", PREVIOUS)):
        team_bill = bills[month, "team"]
        stored = _by(monitoring.query(f'sum by (team) (gpuledger_cost{{period="{which}"}})'), "team")
        expected = {(r["team"],): r["cost"] for r in team_bill.lines.iter_rows(named=True)}
        assert stored.keys() == expected.keys()
        lines = bills[month, "fine"].lines.height
        for key, value in expected.items():
            assert stored[key] == pytest.approx(value, abs=0.01 * lines)
        total = monitoring.query(f'sum(gpuledger_cost{{period="{which}"}})')
        assert float(total[0]["value"][1]) == pytest.approx(team_bill.fleet_cost, abs=0.005)


def test_budget_ratio_unallocated_plans_and_freshness(monitoring, bills, served):
    team_cost = {r["team"]: r["cost"] for r in bills[CURRENT, "team"].lines.iter_rows(named=True)}
    ratio = _by(monitoring.query("gpuledger_budget_used_ratio"), "team")
    assert ratio[("nlp",)] == pytest.approx(team_cost["nlp"] / BUDGETS["nlp"], rel=1e-9)
    assert ratio[("vision",)] == pytest.approx(team_cost["vision"] / BUDGETS["vision"], rel=1e-9)
    assert ratio[("vision",)] > 1 > ratio[("nlp",)]
    assert ratio[("ads",)] == float("inf")  # a zero budget with spending: over budget
    unalloc = _by(monitoring.query('gpuledger_unallocated_card_hours{period="current"}'), "pool", "model")
    expected = {(r["pool"], r["model"]): r["card_hours"]
                for r in bills[CURRENT, "fine"].unallocated.iter_rows(named=True)}
    assert unalloc == pytest.approx(expected)
    saving = _by(monitoring.query("gpuledger_plan_saving"), "status")
    assert saving == {("proposed",): pytest.approx(1387.0)}
    assert _by(monitoring.query("gpuledger_plans"), "status") == {("proposed",): 2.0}
    with duckdb.connect(str(served.warehouse), read_only=True) as con:
        newest = con.execute("SELECT epoch(max(ts)) FROM gpu_samples").fetchone()[0]
    fresh = _by(monitoring.query("gpuledger_last_sample_timestamp_seconds"), "source")
    assert fresh[("gpu_samples",)] == pytest.approx(newest)
    issued = monitoring.query("gpuledger_report_last_issued_period_end_timestamp_seconds")
    assert float(issued[0]["value"][1]) == Period.exact(PREVIOUS).window.start.timestamp()  # none issued


def test_request_metrics_count_what_was_asked(served, monitoring):
    for _ in range(3):
        assert requests.get(served.ops_url + "/healthz", timeout=10).status_code == 200
    assert requests.get(served.url + "/no-such-page", timeout=10).status_code == 404
    text = requests.get(served.ops_url + "/metrics", timeout=10).text
    lines = [ln for ln in text.splitlines() if ln.startswith("gpuledger_http_requests_total{")]
    healthz = [ln for ln in lines if 'route="/healthz"' in ln and 'code="200"' in ln]
    assert healthz and float(healthz[0].rsplit(" ", 1)[1]) >= 3
    assert any('route="unmatched"' in ln and 'code="404"' in ln for ln in lines)
    assert "gpuledger_http_request_duration_seconds_bucket" in text
    assert monitoring.query('gpuledger_http_request_duration_seconds_count{route="/metrics"}')


def test_dropped_samples_counter_reads_the_collect_totals(served):
    from gpuledger.core import collect_stats

    before = collect_stats.read(served.warehouse)
    collect_stats.add(served.warehouse, {"clock_skew": 4, "ha_duplicate": 7})
    collect_stats.add(served.warehouse, {"clock_skew": 1, "nan": 0})
    text = requests.get(served.ops_url + "/metrics", timeout=10).text
    skew = before.get("clock_skew", 0) + 5
    dup = before.get("ha_duplicate", 0) + 7
    assert f'gpuledger_collect_dropped_samples_total{{reason="clock_skew"}} {skew:.1f}' in text
    assert f'gpuledger_collect_dropped_samples_total{{reason="ha_duplicate"}} {dup:.1f}' in text
    assert 'reason="nan"' not in text


def test_team_threshold_from_config_reaches_metrics_and_fires_the_rule(served, tmp_path):
    """nlp's own thresholds (`finance.team_thresholds` in the served config: 1 %, 150 %) appear
    on /metrics, and the budget samples scraped from it, replayed through `promtool test rules`
    against the chart's rules, fire the warning for nlp at a few percent (the default 80 % would
    not) and the critical alert for vision and ads (default 100 %), nothing else."""
    import subprocess

    import yaml
    from prometheus_client.parser import text_string_to_metric_families

    from tests.deploy.chart import RULES
    from tests.deploy.conftest import TEAM_THRESHOLDS

    text = requests.get(served.ops_url + "/metrics", timeout=10).text
    samples = [s for fam in text_string_to_metric_families(text) if fam.name.startswith("gpuledger_budget_")
               for s in fam.samples]
    levels = {(s.labels["team"], s.labels["level"]): s.value
              for s in samples if s.name == "gpuledger_budget_threshold_ratio"}
    assert levels == {("nlp", "warning"): TEAM_THRESHOLDS["nlp"][0], ("nlp", "critical"): TEAM_THRESHOLDS["nlp"][1],
                      ("vision", "warning"): 0.8, ("vision", "critical"): 1.0,
                      ("ads", "warning"): 0.8, ("ads", "critical"): 1.0}
    used = {s.labels["team"]: s.value for s in samples if s.name == "gpuledger_budget_used_ratio"}
    assert TEAM_THRESHOLDS["nlp"][0] < used["nlp"] < 0.8  # only its own threshold makes it a warning
    series = []
    for s in samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted({**s.labels, "job": "gpuledger"}.items()))
        value = "Inf" if s.value == float("inf") else repr(s.value)  # ads: a zero budget, spent
        series.append({"series": f"{s.name}{{{labels}}}", "values": " ".join([value] * 21)})

    def expect(team: str, severity: str) -> dict:
        share = "+Inf%" if used[team] == float("inf") else f"{used[team] * 100:.4g}%"  # humanizePercentage
        summary, description = {
            "warning": (f"Team {team} used {share} of its 2026-11 GPU budget",
                        f"Month-to-date GPU cost of team {team} is past its warning threshold "
                        "(finance.budget_thresholds)."),
            "critical": (f"Team {team} is over its 2026-11 GPU budget ({share})",
                         f"Month-to-date GPU cost of team {team} exceeds teams.budgets."),
        }[severity]
        runbook = ("https://github.com/gpuledger/gpuledger/blob/main/docs/guide/runbooks.md#"
                   + ("gpuledgerbudgetwarning" if severity == "warning" else "gpuledgerbudgetexceeded"))
        return {"exp_labels": {"severity": severity, "team": team, "month": "2026-11", "job": "gpuledger"},
                "exp_annotations": {"summary": summary, "description": description, "runbook_url": runbook}}

    test = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "10m", "alertname": "GpuledgerBudgetWarning", "exp_alerts": [expect("nlp", "warning")]},
            {"eval_time": "10m", "alertname": "GpuledgerBudgetExceeded",
             "exp_alerts": [expect("ads", "critical"), expect("vision", "critical")]},
        ]}]}
    path = tmp_path / "scraped-rules-test.yaml"
    path.write_text(yaml.safe_dump(test))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
