"""deploy/grafana/gpuledger.json: every PromQL expression in it returns data from a real
Prometheus scraping the production server (the demo warehouse), with Grafana's variables set as
"All" would set them. Also: the JSON is a dashboard Grafana imports (uid, panels with targets,
each on the `datasource` variable), with the panels the issues ask for: `datasource`, `cluster`
and `team` variables, money in the import input's currency, cost per hour following the time
picker (issue 33.2). The file is generated (tools/mixin; test_mixin.py checks it is current)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.deploy.conftest import wait_for_series

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gpuledger.json"
VARIABLES = {"$team": ".*", "$cluster": ".*", "$__rate_interval": "1m", "$__range": "1h", "${datasource}": ""}


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def expressions() -> list[tuple[str, str]]:
    """(panel title, expression) for every target of every panel."""
    return [(p["title"], t["expr"]) for p in _dashboard()["panels"] for t in p["targets"]]


def substitute(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"an unknown Grafana variable in {expr!r}"
    return expr


def test_dashboard_shape():
    board = _dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    titles = [p["title"] for p in board["panels"]]
    assert len(set(p["id"] for p in board["panels"])) == len(titles)
    for wanted in ("Cost per team", "Idle cost per team", "Budget burn", "Waste this month", "Data age"):
        assert any(t.startswith(wanted) for t in titles), wanted
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
    names = {v["name"] for v in board["templating"]["list"]}
    assert names == {"datasource", "cluster", "team"}
    assert [i["name"] for i in board["__inputs"]] == ["VAR_CURRENCY"]  # Grafana asks on import
    money = [p for p in board["panels"] if p["fieldConfig"]["defaults"].get("unit", "").startswith("currency")]
    assert len(money) >= 8 and all(p["fieldConfig"]["defaults"]["unit"] == "currency${VAR_CURRENCY}" for p in money)
    assert "currencyUSD" not in DASHBOARD.read_text()  # no hard-coded currency
    # Panels that follow the time picker: series over time, not only this month's gauges.
    follows = [p["title"] for p in board["panels"] if p["type"] == "timeseries"
               and any("delta(" in t["expr"] and "[1h]" in t["expr"] for t in p["targets"])]
    assert {"Cost per hour by team", "Idle cost per hour by team"} <= set(follows)
    ranged = [p for p in board["panels"] if any("$__range" in t["expr"] for t in p["targets"])]
    assert [p["title"] for p in ranged] == ["Cost in the selected range"]
    for title, expr in expressions():  # every gpuledger series is filtered by the cluster variable
        for found in re.findall(r"gpuledger_\w+(\{[^}]*\})?", expr):
            assert 'cluster=~"$cluster"' in found, (title, expr)
    assert any("dcgm" in link.get("tags", []) for link in board["links"])


@pytest.mark.parametrize("title,expr", expressions(), ids=[t for t, _ in expressions()])
def test_every_expression_returns_data(monitoring, title, expr):
    # rate() over $__rate_interval (1m) needs a few scrapes: wait for them once (a steady state).
    wait_for_series(monitoring, 'count_over_time(up{job="gpuledger"}[1m]) >= 5')
    result = monitoring.query(substitute(expr))
    assert result, f"{title}: {expr} returned no data"
    values = [float(r["value"][1]) for r in result]
    assert not any(math.isnan(v) for v in values), f"{title}: NaN in {values}"  # no 0/0


def test_team_variable_query_lists_the_teams(monitoring):
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    query = variables["team"]["query"]["query"]
    selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", query).groups()
    teams = {r["metric"][label] for r in monitoring.query(substitute(selector))}
    assert {"nlp", "vision", "unallocated"} <= teams
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variables["cluster"]["query"]["query"]).groups()
    assert (metric, label) == ("gpuledger_cost", "cluster") and monitoring.query(metric)
