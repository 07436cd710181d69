"""The production server's ops port answers /metrics for a label-poor fleet and an empty warehouse.

What a platform team meets first: GPU nodes without a pool label, namespaces without a team
label, or a fresh install that has collected nothing. `gpuledger serve` (gunicorn, as the chart
runs it) serves each; its ops port's `/metrics` must answer 200 with text a scraper parses, every
label value present, and the stated placeholders (`core.labels`): pool `unknown`, team
`unattributed` (issue 33; a `None` label value once made every scrape a 500, issue 29).

The label-poor warehouse is tests/dashboards/test_label_poor.py's (node without a pool label, one
card of a model no source names, namespaces without a team label, 12 hours). Its numbers are
worked out here from that description and the default price book (H100-80GB at 3.00 per
card-hour; the served settings name no price book): GPU-a held 12 h by a namespace without a
team is 36.00 on `unattributed`; GPU-c free 12 h is 12 unallocated card-hours of H100 in pool
`unknown`, GPU-b free 6 h is 6 of model `unknown`.

The scraped samples then go through the self-monitoring rules with `promtool test rules`: both
scrapes are healthy to them (nothing fires; an empty warehouse still publishes this month's empty
bill), and the same scrape without its `gpuledger_cost` family fires GpuledgerCostSeriesAbsent.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.dashboards.test_label_poor import build
from tests.deploy.chart import RULES
from tests.deploy.conftest import Served, serve

H100_PRICE = 3.00  # core.config.Settings' default price book


@pytest.fixture(scope="module")
def poor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("poor-ops")
    app = serve(folder / "served", build(folder / "poor.duckdb"))
    yield app
    app.server.stop()


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from gpuledger.warehouse import Warehouse

    folder = tmp_path_factory.mktemp("empty-ops")
    with Warehouse.open(folder / "empty.duckdb"):
        pass  # the schema, no rows
    app = serve(folder / "served", folder / "empty.duckdb")
    yield app
    app.server.stop()


def scrape(app: Served) -> tuple[str, dict[str, list]]:
    answer = requests.get(app.ops_url + "/metrics", timeout=30)
    assert answer.status_code == 200, answer.text[:500]
    series: dict[str, list] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            assert all(isinstance(v, str) and v != "None" for v in sample.labels.values()), sample
            series.setdefault(sample.name, []).append(sample)
    return answer.text, series


def test_label_poor_fleet_answers_200_with_the_placeholders(poor: Served) -> None:
    _, series = scrape(poor)
    current = [s for s in series["gpuledger_cost"] if s.labels["period"] == "current"]
    cost = {(s.labels["team"], s.labels["model"]): s.value for s in current}
    assert cost[("unattributed", "H100-80GB")] == pytest.approx(12 * H100_PRICE)
    assert {s.labels["currency"] for s in current} == {"USD"}
    unallocated = {(s.labels["pool"], s.labels["model"]): s.value
                   for s in series["gpuledger_unallocated_card_hours"] if s.labels["period"] == "current"}
    assert unallocated == pytest.approx({("unknown", "H100-80GB"): 12.0, ("unknown", "unknown"): 6.0})


def test_empty_warehouse_answers_200(empty: Served) -> None:
    _, series = scrape(empty)
    assert "gpuledger_snapshot_age_seconds" in series
    assert "gpuledger_unallocated_card_hours" not in series  # no card, no capacity
    assert sum(s.value for s in series["gpuledger_cost"]) == 0.0  # this month's empty bill


def _replay(text: str, without: str) -> list[dict[str, str]]:
    """Each scraped sample (but family `without`) as a promtool input series over 80 minutes,
    with the scrape's `up`."""
    out = [{"series": 'up{job="gpuledger",instance="pod:9464"}', "values": "1x80"}]
    for family in text_string_to_metric_families(text):
        if (not family.name.startswith("gpuledger_") or family.type in ("histogram", "summary")
                or family.name == without):
            continue
        for s in family.samples:
            labels = {**s.labels, "job": "gpuledger", "instance": "pod:9464"}
            body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            value = "Inf" if s.value == float("inf") else repr(float(s.value))
            out.append({"series": f"{s.name}{{{body}}}", "values": f"{value}x80"})
    return out


@pytest.mark.parametrize("which,fires", [("poor", False), ("empty", False), ("poor", True)])
def test_scraped_samples_drive_the_cost_absent_alert(which: str, fires: bool, request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    """`fires`: the scrape replayed without its gpuledger_cost family."""
    text, _ = scrape(request.getfixturevalue(which))
    expected = [{"exp_labels": {"severity": "warning", "job": "gpuledger"}, "exp_annotations": {
        "summary": "gpuledger publishes no cost series",
        "description": "/metrics answers but carries no gpuledger_cost: budget alerts and the dashboard's "
                       "cost panels are empty.",
        "runbook_url": "https://github.com/gpuledger/gpuledger/blob/main/docs/guide/runbooks.md"
                       "#gpuledgercostseriesabsent"}}] if fires else []
    test = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": _replay(text, "gpuledger_cost" if fires else ""), "alert_rule_test": [
            {"eval_time": "70m", "alertname": "GpuledgerCostSeriesAbsent", "exp_alerts": expected},
            *({"eval_time": "70m", "alertname": name, "exp_alerts": []}
              for name in ("GpuledgerScrapeDown", "GpuledgerTargetMissing", "GpuledgerSnapshotStale")),
        ]}]}
    path = tmp_path / "scraped.yaml"
    path.write_text(yaml.safe_dump(test))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
