"""The Grafana dashboard (deploy/grafana/gpuledger.json, the chart's files/gpuledger-dashboard.json).

What it reads is what `dashboards/metrics.py` publishes. Three variables: `datasource`, `cluster`
(the `cluster` label a multi-cluster Prometheus or the ServiceMonitor's relabelings add; "All"
also matches series without it) and `team`. Money panels use the currency of the settings: the
unit is `currency${VAR_CURRENCY}`, an import input (Grafana asks for it on import, USD by
default) that the chart's dashboard ConfigMap fills from the `currency` value.

Panels that follow the time picker read the month-to-date gauges' change (`delta`): per hour for
the cost-per-hour series, over `$__range` for the cost in the chosen range. The month-to-date
gauge of a month is one series (its `month` label), so a month change starts a new series rather
than a drop; a bill re-priced downward by late data shows as a negative hour, which is what
happened to the bill (docs/decisions/0191).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DS = {"type": "prometheus", "uid": "${datasource}"}
MONEY = "currency${VAR_CURRENCY}"
WIDTH = 24


def sel(metric: str, **labels: str) -> str:
    """`metric{cluster=~"$cluster", ...}`: every gpuledger series is filtered by the cluster variable.
    A label value starting with `~` is a regex match, `!~` a negative one."""
    parts = ['cluster=~"$cluster"']
    for key, value in labels.items():
        if value.startswith("!~"):
            parts.append(f'{key}!~"{value[2:]}"')
        elif value.startswith("~"):
            parts.append(f'{key}=~"{value[1:]}"')
        else:
            parts.append(f'{key}="{value}"')
    return f"{metric}{{{','.join(parts)}}}"


CUR = {"period": "current"}
NOT_CARDS = "!~unallocated|sharing_discount"
"""Bill lines that are not a team's cards: the unallocated capacity and the sharing discount."""
TEAM = {"team": "~$team"}
BARS = {"orientation": "horizontal", "displayMode": "basic"}
"""Every bar gauge: one horizontal bar per series."""


def _per_team(metric: str) -> str:
    """This month's `metric` summed per team, for the selected teams."""
    return f"sum by (team) ({sel(metric, **CUR, **TEAM)})"


def _per_team_hourly(metric: str) -> str:
    """What this month's `metric` grew by in each hour, per team (the month-to-date gauge's delta)."""
    return f"sum by (team) (delta({sel(metric, **CUR, **TEAM)}[1h]))"


@dataclass(frozen=True)
class Panel:
    kind: str
    title: str
    exprs: tuple[tuple[str, str], ...]  # (expression, legend)
    w: int
    h: int
    unit: str = ""
    description: str = ""

    @property
    def instant(self) -> bool:
        """Every panel but a time series shows one value per series: an instant query."""
        return self.kind != "timeseries"

    @property
    def options(self) -> dict[str, Any]:
        return dict(BARS) if self.kind == "bargauge" else {}


def _waste() -> str:
    return (
        f"sum({sel('gpuledger_idle_cost', **CUR)}) + "
        f"sum({sel('gpuledger_cost', period='current', team='unallocated')})"
    )


PANELS: tuple[Panel, ...] = (
    Panel(
        "stat",
        "Waste this month (idle + unallocated)",
        ((_waste(), ""),),
        6,
        5,
        MONEY,
        "Cost of card-hours held but idle plus card-hours nobody held, month to date.",
    ),
    Panel(
        "stat",
        "Waste share of the bill",
        ((f"({_waste()}) / sum({sel('gpuledger_cost', **CUR)})", ""),),
        6,
        5,
        "percentunit",
    ),
    Panel(
        "stat",
        "Fleet cost this month",
        ((f"sum({sel('gpuledger_cost', **CUR)})", ""),),
        6,
        5,
        MONEY,
    ),
    Panel(
        "stat",
        "Fleet cost last month",
        ((f"sum({sel('gpuledger_cost', period='previous')})", ""),),
        6,
        5,
        MONEY,
    ),
    Panel(
        "timeseries",
        "Cost per hour by team",
        ((_per_team_hourly("gpuledger_cost"), "{{team}}"),),
        16,
        9,
        MONEY,
        "What each team's bill grew by in each hour, following the time picker (the change of the "
        "month-to-date cost: data lands with each collect, so an hour shows what was billed in it).",
    ),
    Panel(
        "stat",
        "Cost in the selected range",
        ((f"sum(delta({sel('gpuledger_cost', **CUR, **TEAM)}[$__range]))", ""),),
        8,
        9,
        MONEY,
        "What the selected teams' bills grew by over the dashboard's time range.",
    ),
    Panel(
        "bargauge",
        "Cost per team (this month)",
        ((f"sort_desc({_per_team('gpuledger_cost')})", "{{team}}"),),
        12,
        9,
        MONEY,
    ),
    Panel(
        "bargauge",
        "Idle cost per team (this month)",
        ((f"sort_desc({_per_team('gpuledger_idle_cost')})", "{{team}}"),),
        12,
        9,
        MONEY,
    ),
    Panel(
        "timeseries",
        "Idle cost per hour by team",
        ((_per_team_hourly("gpuledger_idle_cost"), "{{team}}"),),
        12,
        9,
        MONEY,
        "Cost of held but idle card-hours added in each hour.",
    ),
    Panel(
        "bargauge",
        "Budget burn",
        ((f"sort_desc({sel('gpuledger_budget_used_ratio', **TEAM)})", "{{team}}"),),
        12,
        9,
        "percentunit",
    ),
    Panel(
        "timeseries",
        "Month-to-date cost per team",
        ((_per_team("gpuledger_cost"), "{{team}}"),),
        12,
        9,
        MONEY,
    ),
    Panel(
        "piechart",
        "Cost by model and sharing mode",
        (
            (
                f"sum by (model, sharing_mode) ({sel('gpuledger_cost', period='current', team=NOT_CARDS)})",
                "{{model}} {{sharing_mode}}",
            ),
        ),
        12,
        9,
        MONEY,
    ),
    Panel(
        "bargauge",
        "Unallocated card-hours by pool",
        ((f"sum by (pool) ({sel('gpuledger_unallocated_card_hours', **CUR)})", "{{pool}}"),),
        12,
        9,
        "h",
    ),
    Panel(
        "bargauge",
        "Plan savings per status (monthly)",
        ((sel("gpuledger_plan_saving"), "{{status}}"),),
        12,
        9,
        MONEY,
    ),
    Panel(
        "stat",
        "Data age per source",
        ((f"time() - {sel('gpuledger_last_sample_timestamp_seconds')}", "{{source}}"),),
        8,
        6,
        "s",
    ),
    Panel(
        "stat",
        "Dashboard snapshot age",
        ((f"max({sel('gpuledger_snapshot_age_seconds')})", ""),),
        4,
        6,
        "s",
    ),
    Panel(
        "timeseries",
        "Dropped samples (rate)",
        (
            (
                f"sum by (reason) (rate({sel('gpuledger_collect_dropped_samples_total')}[$__rate_interval]))",
                "{{reason}}",
            ),
        ),
        6,
        6,
        "short",
    ),
    Panel(
        "timeseries",
        "Dashboard requests",
        (
            (
                f"sum by (route, code) (rate({sel('gpuledger_http_requests_total')}[$__rate_interval]))",
                "{{route}} {{code}}",
            ),
            (
                "histogram_quantile(0.95, sum by (le) "
                f"(rate({sel('gpuledger_http_request_duration_seconds_bucket')}[$__rate_interval])))",
                "p95 latency",
            ),
        ),
        6,
        6,
    ),
)


def _panel(number: int, panel: Panel, x: int, y: int) -> dict[str, Any]:
    targets = []
    for index, (expr, legend) in enumerate(panel.exprs):
        target: dict[str, Any] = {
            "datasource": DS,
            "expr": expr,
            "refId": chr(ord("A") + index),
            "instant": panel.instant,
        }
        if legend:
            target["legendFormat"] = legend
        targets.append(target)
    defaults = {"unit": panel.unit} if panel.unit else {}
    return {
        "id": number,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": panel.w, "h": panel.h},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": panel.options,
    }


def _layout() -> list[dict[str, Any]]:
    """Left to right, a new row when the next panel does not fit (rows as tall as their tallest)."""
    out, x, y, row_h = [], 0, 0, 0
    for number, panel in enumerate(PANELS, start=1):
        if x + panel.w > WIDTH:
            x, y, row_h = 0, y + row_h, 0
        out.append(_panel(number, panel, x, y))
        x, row_h = x + panel.w, max(row_h, panel.h)
    return out


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "label": label,
        "datasource": DS,
        "query": {"query": query, "refId": name},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
        "sort": 1,
    }


def build() -> dict[str, Any]:
    """The dashboard JSON model."""
    return {
        "__inputs": [
            {
                "name": "VAR_CURRENCY",
                "type": "constant",
                "label": "Currency (ISO 4217, gpuledger's `currency`)",
                "value": "USD",
                "description": "The settings' currency: the unit of every money panel.",
            }
        ],
        "uid": "gpuledger-cost",
        "title": "gpuledger — GPU cost and waste",
        "tags": ["gpuledger", "gpu", "dcgm"],
        "description": "Chargeback, idle waste, budget burn and data freshness from gpuledger's /metrics. "
        "Sits beside NVIDIA's DCGM Exporter dashboard (Grafana.com 12239), linked above. "
        "Generated by `python -m tools.mixin`.",
        "schemaVersion": 39,
        "version": 2,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-7d", "to": "now"},
        "refresh": "5m",
        "timezone": "utc",
        "links": [
            {
                "title": "NVIDIA DCGM Exporter",
                "type": "dashboards",
                "tags": ["dcgm"],
                "asDropdown": False,
                "includeVars": False,
                "keepTime": True,
            }
        ],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                    "current": {},
                    "hide": 0,
                },
                _query_variable("cluster", "Cluster", "label_values(gpuledger_cost, cluster)"),
                _query_variable("team", "Team", 'label_values(gpuledger_cost{cluster=~"$cluster"}, team)'),
            ]
        },
        "annotations": {"list": []},
        "panels": _layout(),
    }
