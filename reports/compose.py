"""Gather one month's report content: bill, adjustments, idle, recommendations, statements.

`gather` is the only step that reads the warehouse; everything after it (files, statements)
is a pure function of the `MonthlyData` it returns, which is what the inputs hash covers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from gpuledger.analytics.advice.month import MonthAnalyses
from gpuledger.analytics.billing.notes import bill_notes
from gpuledger.analytics.billing.preemption import preemption_totals
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.analytics.workloads.requested import pod_workloads, workload_usage
from gpuledger.core.config import Settings
from gpuledger.core.rules_record import RecordedRules, computed_under
from gpuledger.reports.adjustments import adjustments_for
from gpuledger.reports.billing import MonthBill, empty_summary, month_bill, require_usage, summary_lines
from gpuledger.reports.fleet_advice import FleetAdvice, fleet_advice
from gpuledger.reports.insights import for_team, idle_rows, recommendation_rows
from gpuledger.reports.layout import safe_name
from gpuledger.reports.statement import (
    IdleRow,
    Recommendation,
    Statement,
    adjustment_rows,
    by_model,
    by_team,
    daily_costs,
    reconciliation,
    statement_number,
    statement_totals,
)
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import kept_day_parts
from gpuledger.warehouse.queries.freshness import newest_sample


@dataclass(frozen=True)
class MonthlyData:
    bill: MonthBill
    summary: pl.DataFrame          # the month's lines, then adjustment lines for issued months
    adjustments: pl.DataFrame
    idle: list[IdleRow]
    recommendations: list[Recommendation]
    inputs_sha256: str
    price_book_version: str
    newest_sample: datetime | None = None
    """The newest sample the month's numbers were computed from (before the period's end),
    stated on every statement: a month billed from a stopped collector must say so."""
    advice: list[FleetAdvice] = field(default_factory=list)
    """The fleet statement's advice rows (`reports.fleet_advice`); not part of the inputs
    hash, which covers what the bill's numbers were computed from."""

    @property
    def period(self) -> str:
        return self.bill.period

    @property
    def rules(self) -> RecordedRules | None:
        """The rules the month's numbers were computed under: the bill's own (`Bill.rules`,
        never today's settings), as a report records them (docs/decisions/0150)."""
        rules = self.bill.raw.rules
        return RecordedRules.of(rules) if rules is not None else None

    @property
    def as_computed(self) -> bool:
        """Whether the month was billed as its roll-up was computed (`--as-computed`): under the
        rules stored with it, not the settings in force when the report was written."""
        return bool(self.bill.raw.as_computed)

    @property
    def computed_under(self) -> str:
        """The statements' rules line (`core.rules_record.computed_under`)."""
        return computed_under(self.rules, as_computed=self.as_computed)

    @property
    def bill_notes(self) -> list[str]:
        """What the month's bill tells its reader (`analytics.billing.notes`): the CLI's stderr
        and the manifest carry it."""
        return bill_notes(self.bill.raw)

    def teams(self) -> list[str]:
        """Teams that get a statement: a usage line this month or an adjustment to pay."""
        rows = self.summary.filter(
            (pl.col("line") == "team")
            | ((pl.col("line") == "adjustment")
               & ~pl.col("team").is_in(list(SPECIAL_LINES)))
        )
        return sorted({str(t) for t in rows["team"].drop_nulls().to_list()})


def inputs_sha256(settings: Settings, bill: MonthBill, adjustments: pl.DataFrame) -> str:
    """Hash of what the numbers were computed from: the billing settings and the finest-grain
    usage rows (the bill's detail), plus the adjustments carried. Same data -> same hash."""
    digest = hashlib.sha256()
    billing = settings.model_dump(
        mode="json",
        include={"currency": True, "price_book": True, "sharing": True, "idle": True,
                 "teams": {"label_key", "fallback"}},
    )
    digest.update(json.dumps(billing, sort_keys=True).encode())
    for frame in (bill.detail, adjustments):
        # Floats are summed in parallel upstream, so their last bits vary between runs: round
        # them (to a millionth) before ordering the rows, so the same data hashes the same.
        cols = sorted(frame.columns)
        canonical = frame.select(
            pl.col(c).round(6) if frame.schema[c] == pl.Float64 else pl.col(c) for c in cols
        )
        if cols:
            canonical = canonical.sort(cols, nulls_last=True)
        digest.update(",".join(cols).encode())
        for chunk in canonical.iter_slices(100_000):  # bounded memory for large fleets
            digest.update(chunk.write_csv(include_header=False, float_precision=6).encode())
    return digest.hexdigest()


def gather(
    wh: Warehouse, settings: Settings, period: str, *, with_adjustments: bool = True,
    month: MonthAnalyses | None = None, as_computed: bool = False,
) -> MonthlyData:
    """Everything the report of `period` shows; `ReportError` when the month has no usage.

    `month`: the month's analyses a caller already computed on this warehouse (the demo
    prints its bill and advice before it issues the report): their usage, recommendations and
    advice kinds are taken where they match the report's bill (`MonthAnalyses.matches`);
    `as_computed`: the month (and the issued months it adjusts) billed as the roll-up was
    computed, under its stored rules (`compute_bill`)."""
    bill = month_bill(wh, settings, period, as_computed=as_computed)
    require_usage(bill, wh.path)
    adjustments = (adjustments_for(wh, settings, period, as_computed=as_computed) if with_adjustments
                   else empty_summary())
    summary = pl.concat([summary_lines(bill), adjustments], how="vertical_relaxed")
    shared = month if month is not None and month.matches(bill.raw) else None
    # read once: recommendations, catalog
    usage = shared.usage if shared is not None else _usage(wh, settings, bill)
    return MonthlyData(
        bill=bill,
        summary=summary,
        adjustments=adjustments,
        idle=idle_rows(bill, pod_workloads(wh)),
        recommendations=recommendation_rows(
            wh, bill, settings, usage=usage, found=shared.recommendations if shared is not None else None),
        inputs_sha256=inputs_sha256(settings, bill, adjustments),
        price_book_version=settings.price_book_version(),
        newest_sample=newest_sample(wh, before=bill.window.end),
        advice=fleet_advice(wh, bill.window, settings, shared.advice if shared is not None else None,
                            bill=bill.raw, usage=usage),
    )


def _usage(wh: Warehouse, settings: Settings, bill: MonthBill) -> pl.DataFrame:
    """The month's per-allocation usage, its statistics through the day parts: after the chart's
    refreshes only the allocations of days whose inputs moved since are computed again."""
    with kept_day_parts(wh.path) as days:
        return workload_usage(wh, bill.window, settings, bill.raw, days=days)


def build_statements(
    data: MonthlyData, settings: Settings, status: str, generated_at: datetime,
    notes: list[str] | None = None,
) -> list[Statement]:
    """The fleet statement, then one per team (alphabetical)."""
    bill = data.bill
    start, end = bill.window.start.date(), bill.window.end.date()
    common = {
        "period": data.period, "window_start": bill.window.start, "window_end": bill.window.end,
        "currency": bill.currency, "status": status, "generated_at": generated_at,
        "price_book_version": data.price_book_version, "issuer": settings.reports.issuer,
        "billing_account": settings.reports.billing_account, "notes": list(notes or []),
        "newest_sample": data.newest_sample, "computed_under": data.computed_under,
    }
    account, budgets = settings.reports.billing_account, settings.teams.budgets
    out = [
        Statement(
            key="fleet", title="GPU fleet", team=None,
            totals={**statement_totals(data.summary), **preemption_totals(bill.raw.preemption)},
            days=daily_costs(bill.detail, start, end), by_model=by_model(data.summary),
            by_team=by_team(data.summary), idle=data.idle,
            recommendations=data.recommendations, advice=data.advice,
            adjustments=adjustment_rows(data.summary), number=statement_number(account, data.period, None),
            budgets=dict(budgets), reconciliation=reconciliation(data.summary, bill.fleet_cost),
            **common,  # type: ignore[arg-type]
        )
    ]
    for team in data.teams():
        lines = data.summary.filter(pl.col("team") == team)
        centre = settings.finance.cost_centres.get(team)
        out.append(
            Statement(
                key=f"team-{safe_name(team)}", title=f"Team {team}", team=team,
                number=statement_number(account, data.period, team), budget=budgets.get(team),
                cost_centre=centre.cost_centre if centre else None,
                totals={**statement_totals(lines), **preemption_totals(bill.raw.preemption, team)},
                days=daily_costs(bill.detail.filter(pl.col("team") == team), start, end),
                by_model=by_model(lines), idle=for_team(data.idle, team),
                recommendations=for_team(data.recommendations, team),
                adjustments=adjustment_rows(lines), **common,  # type: ignore[arg-type]
            )
        )
    return out
