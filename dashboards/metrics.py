"""gpuledger's results as Prometheus metrics, read from the dashboard's serving snapshot.

Why a custom collector: every value here is already computed by the dashboard (the bill of this
month and the last, the plans, freshness), cached per snapshot in `ReadModel`; a scrape reads
those cached values, so Prometheus scraping every 30 s costs a dictionary lookup, not a bill.
The numbers are the bill's own (`analytics.billing.bill.compute_bill` lines, rounded to the cent as
`gpuledger bill` prints them), so a Grafana panel and the invoice never disagree.

Periods: `current` is the newest month with data (what the dashboard opens on), `previous` the
month before; the `month` label names it (`2026-11`). A month whose bill is refused (its roll-up
computed under other rules than the server's, raw samples gone: docs/decisions/0158) has no bill
or budget series, and a log line says why; the scrape still answers.

Metrics (every name has the `gpuledger_` prefix):
- `cost`, `idle_cost` {period, month, team, model, sharing_mode}: money in the settings'
  currency (`currency` label);
- `unallocated_card_hours` {period, month, pool, model}: card-hours no one held;
- `budget_used_ratio`, `budget_forecast_ratio`, `budget_threshold_crossed` {team, month} and
  `budget_threshold_ratio` {team, level}: `analytics.billing.budgets.budget_gauges` of this month's
  bill, the rule `gpuledger budgets` and the team page read (per-team thresholds included), so
  the alert rules compare against the configured thresholds, never a number of their own;
- `plan_saving` {status}: sum of `monthly_cost_saving` over plans in each status;
  `plans` {status}: how many; `plan_updated_timestamp_seconds` {plan, kind, status} for plans
  still moving (approved, applying): the alert "stuck in applying" reads it;
- `last_sample_timestamp_seconds` {source}: newest sample per source table, and the
  Kubernetes snapshot's watermark;
- `report_last_issued_period_end_timestamp_seconds`: the end of the newest issued month (or the
  start of the first month with data, when none was issued yet: nothing is overdue before it);
- `collect_dropped_samples_total` {reason}: samples the collector dropped, by reason, from the
  counts `gpuledger collect` leaves beside the warehouse (`core.collect_stats`);
- `snapshot_age_seconds`: how old the data served is.

Label values are never missing, whatever the cluster labels (a scrape that meets a `None` label
value fails as a whole, so one node without a pool label once took every series down with a
500): a value the cluster does not publish is the bill's own `unknown` (a node without a pool
label is in pool `unknown`, a card no source names is model `unknown`: `core.labels.UNKNOWN`),
and a dimension a line does not have (the `sharing_discount` line's model) is the empty
value, which Prometheus reads as an absent label (`core.labels.label_text`). Usage without a
team is on team `unattributed`, as on the bill. Every label value of every family passes
`_labels` (`label_text`), so no family can meet a `None`. The self-monitoring alerts
(docs/decisions/0188) read `up` and `gpuledger_snapshot_age_seconds`, published on every scrape
with data served, and `gpuledger_cost`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpuledger.analytics.billing.budgets import GAUGES, budget_gauges, budget_status
from gpuledger.core import collect_stats
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import GpuledgerError
from gpuledger.core.labels import label_text
from gpuledger.core.period import Period
from gpuledger.dashboards.readmodel import ReadModel
from gpuledger.optimizer.plan.store import list_plans
from gpuledger.warehouse.queries.freshness import data_range, newest_ts
from gpuledger.warehouse.queries.reports import issued_periods
from gpuledger.warehouse.store import Warehouse

log = logging.getLogger(__name__)

BILL_BY = ("team", "model", "sharing_mode")
SAMPLE_TABLES = ("gpu_samples", "queue_samples", "token_samples")
MOVING_STATUSES = ("approved", "applying")


def _labels(*values: object) -> list[str]:
    """Label values as text, None as the empty value (module docstring)."""
    return [label_text(v) for v in values]


def _ts(moment: datetime | None) -> float | None:
    return None if moment is None else moment.astimezone(UTC).timestamp()


class LedgerCollector(Collector):
    """The collector registered on the app's registry; `collect()` runs on each scrape."""

    def __init__(self, data: ReadModel, settings: Settings, warehouse: str) -> None:
        self.data = data
        self.settings = settings
        self.warehouse = warehouse

    def collect(self) -> Iterator[Metric]:
        snap = self.data.serving_snapshot
        if snap is None:  # nothing to serve yet: /readyz says so, the metrics stay absent
            yield from self._dropped()
            return
        current = self.data.default_period(snap)
        months = {"current": current, "previous": str(Period.exact(current).shift(-1))}
        yield from self._bills(months)
        yield from self.data.memo(("metrics", "plans"), self._plans)
        yield from self.data.memo(("metrics", "freshness"), self._freshness)
        age = GaugeMetricFamily("gpuledger_snapshot_age_seconds", "Age of the data the dashboard serves")
        age.add_metric([], max(0.0, (utcnow() - snap.taken_at).total_seconds()))
        yield age
        yield from self._dropped()

    # 1. Bills --------------------------------------------------------------------------------
    def _bills(self, months: dict[str, str]) -> Iterator[Metric]:
        currency = self.settings.currency
        labels = ["period", "month", "team", "model", "sharing_mode", "currency"]
        cost = GaugeMetricFamily("gpuledger_cost", "Billed cost of the month", labels=labels)
        idle = GaugeMetricFamily("gpuledger_idle_cost", "Cost of held but idle card-hours", labels=labels)
        unalloc = GaugeMetricFamily("gpuledger_unallocated_card_hours", "Card-hours nobody held",
                                    labels=["period", "month", "pool", "model"])
        billed: dict[str, Any] = {}
        for which, month in months.items():
            try:
                bill = billed[which] = self.data.bill(month, BILL_BY)
            except GpuledgerError as exc:  # e.g. computed under other rules (0158): no series, not a 500
                log.warning("metrics: no bill gauges for %s: %s", month, exc)
                continue
            for row in bill.lines.iter_rows(named=True):
                mode = row["sharing_mode"] or "exclusive"
                key = _labels(which, month, row["team"], row["model"], mode, currency)
                cost.add_metric(key, float(row["cost"]))
                idle.add_metric(key, float(row["idle_cost"] or 0.0))
            for row in bill.unallocated.iter_rows(named=True):
                unalloc.add_metric(_labels(which, month, row["pool"], row["model"]), float(row["card_hours"]))
        yield from (cost, idle, unalloc)
        if "current" in billed:
            yield from self.data.memo(("metrics", "budgets", months["current"]),
                                      lambda: self._budgets(months["current"]))

    def _budgets(self, month: str) -> list[Metric]:
        """The budget gauges of `month`: labels from `budget_gauges`, plus `month` on the ratios."""
        status = budget_status(self.data.bill(month, BILL_BY), self.settings)
        out: list[Metric] = []
        for name, samples in budget_gauges(status, self.settings).items():
            per_level = name == "gpuledger_budget_threshold_ratio"  # a setting, not a month's figure
            family = GaugeMetricFamily(name, GAUGES[name], labels=["team", "level" if per_level else "month"])
            for labels, value in samples:
                family.add_metric(_labels(labels["team"], labels["level"] if per_level else month), value)
            out.append(family)
        return out

    # 2. Plans --------------------------------------------------------------------------------
    def _plans(self) -> list[Metric]:
        saving = GaugeMetricFamily("gpuledger_plan_saving", "Monthly saving of the plans in each status",
                                   labels=["status"])
        count = GaugeMetricFamily("gpuledger_plans", "Plans in each status", labels=["status"])
        moving = GaugeMetricFamily("gpuledger_plan_updated_timestamp_seconds",
                                   "When a plan still moving (approved, applying) last changed status",
                                   labels=["plan", "kind", "status"])
        totals: dict[str, list[float]] = {}
        with self.data.store.reader(self.data.serving()) as wh:
            records = list_plans(wh)
        for record in records:
            entry = totals.setdefault(record.status, [0.0, 0.0])
            entry[0] += float(record.plan.effect.monthly_cost_saving or 0.0)
            entry[1] += 1
            if record.status in MOVING_STATUSES:
                moving.add_metric(_labels(record.plan.id, record.plan.kind, record.status),
                                  record.updated_at.timestamp())
        for status, (money, n) in sorted(totals.items()):
            saving.add_metric(_labels(status), money)
            count.add_metric(_labels(status), n)
        return [saving, count, moving]

    # 3. Freshness ----------------------------------------------------------------------------
    def _freshness(self) -> list[Metric]:
        last = GaugeMetricFamily("gpuledger_last_sample_timestamp_seconds",
                                 "Newest sample loaded, per source", labels=["source"])
        issued = GaugeMetricFamily("gpuledger_report_last_issued_period_end_timestamp_seconds",
                                   "End of the newest month whose report was issued")
        with self.data.store.reader(self.data.serving()) as wh:
            for table in SAMPLE_TABLES:
                value = _ts(newest_ts(wh, table))
                if value is not None:
                    last.add_metric([table], value)
            kube = _ts(wh.watermark("kubernetes"))
            if kube is not None:
                last.add_metric(["kubernetes"], kube)
            end = _issued_end(wh)
        if end is not None:
            issued.add_metric([], end)
        return [last, issued]

    # 4. Collector counts ---------------------------------------------------------------------
    def _dropped(self) -> Iterator[Metric]:
        counter = CounterMetricFamily("gpuledger_collect_dropped_samples",
                                      "Samples the collector did not store, by reason", labels=["reason"])
        for reason, n in sorted(collect_stats.read(self.warehouse).items()):
            counter.add_metric(_labels(reason), n)
        yield counter


def _issued_end(wh: Warehouse) -> float | None:
    """End of the newest issued month; else the start of the first month with data."""
    newest = max(issued_periods(wh), default=None)
    if newest:
        return _ts(Period.exact(str(newest)).window.end)
    span = data_range(wh)  # samples and roll-ups: the serving store keeps only recent samples
    if span is None:
        return None
    return _ts(Period.of(span[0]).window.start)
