"""What a statement shows, computed from the month's bill (no HTML here).

One statement per team and one for the fleet. A team statement must fit one printed A4 page:
the renderer caps the tables with `Limits` (the rest folded into an "n more" row, so totals
still add up; the full data is in summary.csv and focus.csv), and tighter limits are tried
until it fits. The fleet statement lists every team (a statement finance reconciles must not
fold teams into "8 more"), with the reconciliation block, and takes more pages when needed.

Each statement has a number (`statement_number`): `<billing account>-<YYYYMM>-<TEAM|FLEET>`,
the same string FOCUS carries as `InvoiceId`, so a statement and its FOCUS rows match.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import polars as pl

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.reports.chart import DayCost
from gpuledger.reports.fleet_advice import FleetAdvice


@dataclass(frozen=True)
class Limits:
    """How many rows each statement table may show."""

    table_rows: int = 10
    idle_rows: int = 5
    recommendations: int = 5


LIMITS = (Limits(), Limits(7, 4, 4), Limits(5, 3, 3), Limits(3, 2, 2))
"""Tried in order until a statement fits one page."""


@dataclass(frozen=True)
class IdleRow:
    """One allocation that held a card while it sat idle."""

    team: str
    holder: str
    device: str
    idle_card_hours: float
    idle_cost: float
    idle_fraction: float


@dataclass(frozen=True)
class Recommendation:
    team: str | None
    action: str
    workload: str
    detail: str
    monthly_savings: float


@dataclass(frozen=True)
class Statement:
    """Everything one statement page shows."""

    key: str                      # file stem: `fleet` or `team-<name>`
    title: str
    team: str | None              # None for the fleet statement
    period: str
    window_start: datetime
    window_end: datetime
    currency: str
    status: str                   # "DRAFT", "FINAL v1", "REISSUE v2"
    generated_at: datetime
    price_book_version: str
    issuer: str
    billing_account: str
    totals: dict[str, float]
    days: list[DayCost]
    by_model: list[dict[str, Any]]
    by_team: list[dict[str, Any]] = field(default_factory=list)
    idle: list[IdleRow] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    adjustments: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    newest_sample: datetime | None = None   # the data's "as of": newest sample in the period
    number: str = ""                        # `statement_number`
    budget: float | None = None             # the team's monthly budget (`teams.budgets`)
    budgets: dict[str, float] = field(default_factory=dict)   # fleet statement: every team's
    reconciliation: list[tuple[str, float]] = field(default_factory=list)
    """Fleet statement: (label, amount) parts that add up to the fleet cost, then the total."""
    cost_centre: str | None = None
    advice: list[FleetAdvice] = field(default_factory=list)
    """Fleet statement: the top fleet-advice rows (`reports.fleet_advice`); empty on team statements."""
    computed_under: str = ""
    """The rules the numbers were computed under, one line (`core.rules_record.computed_under`)."""


def statement_number(account: str, period: str, team: str | None) -> str:
    """`gpu-fleet-202611-NLP`: stable per account, month and team (FLEET for the fleet)."""
    import re

    who = "FLEET" if team is None else re.sub(r"[^A-Za-z0-9]+", "-", team).strip("-").upper()
    return f"{account}-{period.replace('-', '')}-{who}"


def reconciliation(lines: pl.DataFrame, fleet_cost: float) -> list[tuple[str, float]]:
    """Team charges + platform-absorbed sharing discount + unallocated + unattributed = fleet
    cost (the month's own lines; late-data adjustments are shown apart)."""
    own = lines.filter(pl.col("line") != "adjustment")

    def part(line: str) -> float:
        return round(float(own.filter(pl.col("line") == line)["cost"].sum() or 0.0), 2)

    parts = [
        ("Team charges", part("team")),
        ("Sharing discount absorbed by the platform", part(SpecialLine.SHARING_DISCOUNT)),
        ("Unallocated capacity", part(SpecialLine.UNALLOCATED)),
        ("Unattributed usage (no team label)", part(SpecialLine.UNATTRIBUTED)),
    ]
    return [*parts, ("Fleet cost", round(fleet_cost, 2))]


def statement_totals(lines: pl.DataFrame) -> dict[str, float]:
    def s(name: str, frame: pl.DataFrame = lines) -> float:
        return float(frame[name].sum() or 0.0) if frame.height else 0.0

    own = lines.filter(pl.col("line") != "adjustment")
    adjust = lines.filter(pl.col("line") == "adjustment")
    return {
        "card_hours": s("card_hours", own),
        "list_cost": s("list_cost", own),
        "sharing_discount": s("sharing_discount", own.filter(pl.col("line") != SpecialLine.SHARING_DISCOUNT)),
        "cost": s("cost", own),
        "idle_card_hours": s("idle_card_hours", own),
        "idle_cost": s("idle_cost", own),
        "adjustments": s("cost", adjust),
        "total_due": s("cost", lines),
    }


def daily_costs(detail: pl.DataFrame, start: date, end: date) -> list[DayCost]:
    """Cost and idle cost per UTC day of the window, zero-filled for days without usage."""
    per_day = (
        detail.with_columns(pl.col("day").cast(pl.Date).alias("_d"))
        .group_by("_d").agg(pl.col("cost").sum(), pl.col("idle_cost").sum())
    )
    found = {r[0]: (float(r[1]), float(r[2])) for r in per_day.iter_rows()}
    out = []
    for d in pl.date_range(start, end, "1d", closed="left", eager=True).to_list():
        cost, idle = found.get(d, (0.0, 0.0))
        out.append(DayCost(d, cost, idle))
    return out


def by_model(lines: pl.DataFrame) -> list[dict[str, Any]]:
    own = lines.filter(pl.col("line").is_in(["team", SpecialLine.UNATTRIBUTED, SpecialLine.UNALLOCATED]))
    grouped = (
        own.group_by(["model", "sharing_mode"])
        .agg(pl.col("card_hours", "list_cost", "sharing_discount", "cost", "idle_cost").sum())
        .sort("cost", descending=True)
    )
    return grouped.to_dicts()


def by_team(lines: pl.DataFrame) -> list[dict[str, Any]]:
    grouped = (
        lines.filter(pl.col("line") != "adjustment")
        .group_by("team")
        .agg(pl.col(
            "card_hours", "list_cost", "sharing_discount", "cost", "idle_card_hours", "idle_cost"
        ).sum())
        .sort("cost", descending=True)
    )
    return grouped.to_dicts()


def capped(
    rows: list[dict[str, Any]], label_keys: tuple[str, ...], limit: int
) -> list[dict[str, Any]]:
    """At most `limit` rows; the rest folded into one 'n more' row so totals still add up."""
    if len(rows) <= limit:
        return rows
    kept, rest = rows[: limit - 1], rows[limit - 1:]
    folded: dict[str, Any] = {k: "" for k in label_keys}
    folded[label_keys[0]] = f"{len(rest)} more"
    for key in rows[0]:
        if key not in label_keys:
            folded[key] = sum(float(r[key] or 0.0) for r in rest)
    return [*kept, folded]


def adjustment_rows(lines: pl.DataFrame) -> list[dict[str, Any]]:
    adjust = lines.filter(pl.col("line") == "adjustment")
    grouped = (
        adjust.group_by(["for_period", "team"]).agg(pl.col("card_hours", "cost").sum())
        .sort(["for_period", "team"])
    )
    return grouped.to_dicts()
