"""The alert rules (deploy/helm/gpuledger/files/gpuledger-rules.yaml), as data with their reasons.

Each rule's `why` becomes the comment above its expression in the YAML, so the file reads as
before; `runbook_url` points at the rule's section of docs/guide/runbooks.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

RUNBOOKS = "https://github.com/gpuledger/gpuledger/blob/main/docs/guide/runbooks.md"
JOB = 'job="gpuledger"'
"""The scrape job the self-monitoring rules select: the chart's ServiceMonitor relabels its job
to this name, and a plain scrape config names it so (docs/guide/runbooks.md)."""


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    why: str = ""

    @property
    def runbook_url(self) -> str:
        return f"{RUNBOOKS}#{self.name.lower()}"

    def as_rule(self) -> dict[str, object]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": self.runbook_url,
            },
        }


USED = "gpuledger_budget_used_ratio"
OVER = "ignoring(month, level) group_left() gpuledger_budget_threshold_ratio"
TEAM, MONTH, VALUE = "{{ $labels.team }}", "{{ $labels.month }}", "{{ $value | humanizePercentage }}"
DURATION = "{{ $value | humanizeDuration }}"

BUDGETS = (
    Alert(
        "GpuledgerBudgetWarning",
        f'{USED} >= {OVER}{{level="warning"}}\nunless\n{USED} >= {OVER}{{level="critical"}}\n',
        "5m",
        "warning",
        f"Team {TEAM} used {VALUE} of its {MONTH} GPU budget",
        f"Month-to-date GPU cost of team {TEAM} is past its warning threshold (finance.budget_thresholds).",
        why="Budgets: the used ratio against the team's own thresholds (gpuledger_budget_threshold_ratio,\n"
        "from finance.budget_thresholds / finance.team_thresholds: default 80 % and 100 %), so a\n"
        "threshold changes in gpuledger's config, never here. `ignoring(month, level) group_left()`\n"
        "keeps the ratio's labels (month included) and matches each team's series of one scrape.",
    ),
    Alert(
        "GpuledgerBudgetExceeded",
        f'{USED} >= {OVER}{{level="critical"}}',
        "5m",
        "critical",
        f"Team {TEAM} is over its {MONTH} GPU budget ({VALUE})",
        "Month-to-date GPU cost of team {{ $labels.team }} exceeds teams.budgets.",
    ),
    Alert(
        "GpuledgerBudgetForecastOver",
        "gpuledger_budget_forecast_ratio > 1 and gpuledger_budget_used_ratio < 1",
        "6h",
        "info",
        f"Team {TEAM} is on pace for {VALUE} of its {MONTH} GPU budget",
        "At the month's pace so far, team {{ $labels.team }} ends the month over teams.budgets.",
        why="On pace to overspend but not over yet: a heads-up for the month's second half.",
    ),
    Alert(
        "GpuledgerCollectorStale",
        'time() - gpuledger_last_sample_timestamp_seconds{source="gpu_samples"} > 1800',
        "5m",
        "warning",
        "gpuledger has no GPU samples newer than {{ $value | humanizeDuration }}",
        "The collect CronJob has not loaded DCGM data for more than two intervals: bills and alerts lag.",
        why="Two collect intervals (the CronJob runs every 15 minutes) without a new DCGM sample.",
    ),
    Alert(
        "GpuledgerReportOverdue",
        "(time() - gpuledger_report_last_issued_period_end_timestamp_seconds)\n"
        "  > on() group_left() ((day_of_month() - 1) * 86400 + hour() * 3600 + 3600)\n"
        "and on() (day_of_month() >= 2)\n",
        "15m",
        "warning",
        "Last month's gpuledger report is not issued",
        "The report CronJob (gpuledger report due) has not issued last month's statements by day 2.",
        why="From day 2 of a month on, last month's report must be issued: the newest issued month\n"
        "must end at the start of this month (time() minus the days and hours into it, with an\n"
        "hour of slack for the minutes and seconds).",
    ),
    Alert(
        "GpuledgerPlanStuckApplying",
        'time() - gpuledger_plan_updated_timestamp_seconds{status="applying"} > 1800',
        "5m",
        "critical",
        f"Plan {{{{ $labels.plan }}}} ({{{{ $labels.kind }}}}) has been applying for {DURATION}",
        "A plan in applying for over 30 minutes: check `gpuledger plans show {{ $labels.plan }}`; "
        "nodes may be cordoned.",
    ),
)

SELF = (
    Alert(
        "GpuledgerTargetMissing",
        f"absent(up{{{JOB}}})",
        "15m",
        "critical",
        "Prometheus has no gpuledger target",
        'No scrape target with job="gpuledger" exists: every gpuledger alert is silent.',
        why="No target at all: the ServiceMonitor or scrape config lost the pod, or the release is gone.",
    ),
    Alert(
        "GpuledgerScrapeDown",
        f"up{{{JOB}}} == 0",
        "5m",
        "critical",
        "gpuledger's /metrics on {{ $labels.instance }} does not answer",
        "The scrape of gpuledger's ops port fails (pod down, port closed or /metrics answering an error).",
    ),
    Alert(
        "GpuledgerCostSeriesAbsent",
        f"absent(gpuledger_cost{{{JOB}}}) and on() (up{{{JOB}}} == 1)",
        "1h",
        "warning",
        "gpuledger publishes no cost series",
        "/metrics answers but carries no gpuledger_cost: budget alerts and the dashboard's "
        "cost panels are empty.",
        why="Scraped fine but no bill published: nothing served yet, or the month's bill is refused\n"
        "(a log line of the dashboard says why). An hour, so a fresh install's first collect fits.",
    ),
    Alert(
        "GpuledgerSnapshotStale",
        f"gpuledger_snapshot_age_seconds{{{JOB}}} > 3600",
        "15m",
        "warning",
        "gpuledger serves data {{ $value | humanizeDuration }} old",
        "The dashboard's serving snapshot is not refreshed: pages, API and /metrics show old numbers.",
        why="The dashboard re-reads the warehouse every refresh (120 s by default); an hour-old\n"
        "snapshot means the refresh fails (warehouse locked, volume full).",
    ),
)

GROUPS: tuple[tuple[str, str, tuple[Alert, ...]], ...] = (
    ("gpuledger", "", BUDGETS),
    (
        "gpuledger-self",
        "The exporter itself (docs/decisions/0188): the rules above stay silent when gpuledger's\n"
        '/metrics is gone, so these say so. They expect the scrape job to be called "gpuledger" (the\n'
        "chart's ServiceMonitor relabels its job to that name; a plain scrape config names it so).",
        SELF,
    ),
)

HEADER = """\
# gpuledger's alert rules: the one copy, generated by `python -m tools.mixin` from
# tools/mixin/rules.py (edit that, not this file). The chart's PrometheusRule embeds this file, and
# deploy/prometheus/gpuledger-rules.yaml (a link to it) is the plain rules file for a Prometheus
# without the operator (`rule_files:`). Checked by `promtool check rules` and unit-tested with
# `promtool test rules` (tests/deploy/rules_test.yaml). Each alert's runbook_url opens its
# section of docs/guide/runbooks.md.
"""


def _scalar(text: str) -> str:
    """A one-line YAML scalar: plain when YAML reads it back unchanged, else double-quoted."""
    try:
        if yaml.safe_load(f"k: {text}") == {"k": text}:
            return text
    except yaml.YAMLError:
        pass
    return json.dumps(text)


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in text.splitlines()] if text else []


def render() -> str:
    """The rules file's text: readable YAML with each rule's reason as a comment."""
    out = [HEADER.rstrip("\n"), "groups:"]
    for name, why, alerts in GROUPS:
        out += _comment(why, "  ")
        out += [f"  - name: {name}", "    rules:"]
        for a in alerts:
            out.append(f"      - alert: {a.name}")
            out += _comment(a.why, "        ")
            if "\n" in a.expr:
                out.append("        expr: |")
                out += [f"          {line}" for line in a.expr.rstrip("\n").splitlines()]
            else:
                out.append(f"        expr: {_scalar(a.expr)}")
            out += [
                f"        for: {a.for_}",
                f"        labels: {{severity: {a.severity}}}",
                "        annotations:",
                f"          summary: {json.dumps(a.summary)}",
                f"          description: {json.dumps(a.description)}",
                f"          runbook_url: {json.dumps(a.runbook_url)}",
            ]
    return "\n".join(out) + "\n"


def as_data() -> dict[str, object]:
    """The rules as Prometheus reads them (what `render()` parses to)."""
    return {"groups": [{"name": name, "rules": [a.as_rule() for a in alerts]} for name, _, alerts in GROUPS]}
