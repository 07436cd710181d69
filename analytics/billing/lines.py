"""From priced detail rows to the bill's lines: group, add the discount line, redistribute,
round to whole cents so the lines add up to the fleet cost exactly.

1. Group the detail by the requested dimensions (team always first).
2. Add the `sharing_discount` line: the platform funds the discounts given to shared usage, so
   its cost is their total (its `sharing_discount` column is that total, negated: on every line
   `cost = list_cost - sharing_discount + utilization_adjustment + redistributed_cost`).
3. Redistribute the `unallocated` lines' cost to the team lines when the policy says so:
   `proportional` to each team line's cost, or `even` (the same amount per team, split over the
   team's lines by cost). Cost moves, card-hours never do.
4. Sort the lines (so rounding ties break the same way every time), then round every money
   column as a whole (largest remainder), so each column keeps its exact total: list cost sums
   to the fleet cost, discounts and moved amounts sum to zero. Cost is the sum of rounded parts,
   so the lines' costs add up to the fleet cost to the cent. The flag columns
   (`FLAG_HOURS`, `unpriced`) follow the original ones, so existing readers keep their columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from gpuledger.analytics.billing.money import apportion_cents
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES, SpecialLine

SUMS: tuple[str, ...] = (
    "card_hours", "list_cost", "sharing_discount", "utilization_adjustment", "idle_card_hours",
    "held_idle_card_hours", "idle_cost", "activity_unknown_card_hours", "unpriced_card_hours",
)
MONEY: tuple[str, ...] = (
    "list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost", "idle_cost",
)
LINE_VALUES: tuple[str, ...] = (
    "card_hours", "list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost",
    "cost", "idle_card_hours", "held_idle_card_hours", "idle_cost",
)
FLAG_HOURS: tuple[str, ...] = ("activity_unknown_card_hours", "unpriced_card_hours")
"""Card-hours a line holds that the reader must know about, added after the original columns:
held with no activity reading in the hour (never counted idle nor busy), and held on a model
with no price anywhere (billed at zero). `unpriced` is true where the second is above zero."""
HOURS: tuple[str, ...] = ("card_hours", "idle_card_hours", "held_idle_card_hours", *FLAG_HOURS)
"""Line columns in card-hours (6 decimals in JSON); the other LINE_VALUES are money."""


def group_lines(detail: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Steps 1 and 2: one row per combination of `by`, plus the sharing-discount line."""
    # Lazy: only the grouped and summed columns are read (half the time of the eager call on a
    # device-grain detail of millions of rows, issue 34)
    lines = detail.lazy().group_by(list(by)).agg([pl.col(c).sum() for c in SUMS]).collect()
    discount_total = float(detail["sharing_discount"].sum())
    special: dict[str, object] = {c: None for c in by} | {c: 0.0 for c in SUMS}
    special["team"] = SpecialLine.SHARING_DISCOUNT.value
    special["sharing_discount"] = -discount_total
    extra = pl.DataFrame([special], schema=lines.schema)
    return pl.concat([lines, extra], how="vertical")


def redistribute(lines: pl.DataFrame, policy: str) -> pl.DataFrame:
    """Step 3: add `redistributed_cost` (unrounded) per the policy."""
    pre = lines["list_cost"] - lines["sharing_discount"] + lines["utilization_adjustment"]
    teams = lines["team"].to_list()
    is_target = [t not in SPECIAL_LINES for t in teams]
    source_rows = [i for i, t in enumerate(teams) if t == SpecialLine.UNALLOCATED]
    moved = [0.0] * lines.height
    pool = sum(float(pre[i]) for i in source_rows)
    targets = [i for i, ok in enumerate(is_target) if ok]
    if policy != "none" and targets and abs(pool) > 0:
        weights = _weights(policy, targets, teams, [float(v) for v in pre])
        for i in source_rows:
            moved[i] = -float(pre[i])
        for i, w in zip(targets, weights, strict=True):
            moved[i] += pool * w
    return lines.with_columns(pl.Series("redistributed_cost", moved, dtype=pl.Float64))


def _weights(policy: str, targets: list[int], teams: list[str | None], cost: list[float]) -> list[float]:
    def spread(rows: list[int]) -> list[float]:
        total = sum(max(cost[i], 0.0) for i in rows)
        if total <= 0:
            return [1.0 / len(rows)] * len(rows)
        return [max(cost[i], 0.0) / total for i in rows]

    if policy == "proportional":
        return spread(targets)
    by_team: dict[str | None, list[int]] = {}
    for i in targets:
        by_team.setdefault(teams[i], []).append(i)
    weight = {i: 0.0 for i in targets}
    for rows in by_team.values():
        for i, w in zip(rows, spread(rows), strict=True):
            weight[i] = w / len(by_team)
    return [weight[i] for i in targets]


def round_lines(lines: pl.DataFrame, fleet_cost: float, by: Sequence[str]) -> pl.DataFrame:
    """Step 4: whole cents per column, `cost` as the sum of its rounded parts."""
    totals: dict[str, float | None] = {
        "list_cost": fleet_cost, "sharing_discount": 0.0, "utilization_adjustment": 0.0,
        "redistributed_cost": 0.0, "idle_cost": None,
    }
    cents: dict[str, list[int]] = {}
    for col in MONEY:
        values = [float(v) for v in lines[col].to_list()]
        total = totals[col]
        cents[col] = apportion_cents(values, total if total is not None else None)
    cost = [
        lc - sd + ua + rc
        for lc, sd, ua, rc in zip(
            cents["list_cost"], cents["sharing_discount"], cents["utilization_adjustment"],
            cents["redistributed_cost"], strict=True,
        )
    ]
    out = lines.with_columns(
        *[pl.Series(col, [c / 100 for c in cents[col]], dtype=pl.Float64) for col in MONEY],
        pl.Series("cost", [c / 100 for c in cost], dtype=pl.Float64),
        (pl.col("unpriced_card_hours") > 0).alias("unpriced"),
    )
    return out.select([*by, *LINE_VALUES, *FLAG_HOURS, "unpriced"])


def line_json(row: dict[str, Any]) -> dict[str, Any]:
    """One line as the bill's JSON writes it: card-hours to 6 decimals, money to cents."""
    line: dict[str, Any] = {}
    for key, value in row.items():
        if key in HOURS:
            line[key] = round(float(value), 6)
        elif key in LINE_VALUES:
            line[key] = round(float(value), 2)
        else:
            line[key] = value.isoformat() if hasattr(value, "isoformat") else value
    return line


def order_lines(lines: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Teams alphabetically, then unattributed, unallocated and the discount line."""
    rank = (
        pl.when(pl.col("team") == SpecialLine.UNATTRIBUTED.value).then(1)
        .when(pl.col("team") == SpecialLine.UNALLOCATED.value).then(2)
        .when(pl.col("team") == SpecialLine.SHARING_DISCOUNT.value).then(3)
        .otherwise(0)
    )
    return (
        lines.with_columns(rank.alias("_rank"))
        .sort(["_rank", *by], nulls_last=True)
        .drop("_rank")
    )


def unallocated_summary(rows: pl.DataFrame) -> pl.DataFrame:
    """The bill's `unallocated` table: capacity nobody held, per pool and model."""
    return (
        rows.group_by("pool", "model")
        .agg(
            pl.col("card_hours").sum(),
            pl.col("stranded_card_hours").sum(),
            pl.col("list_cost").sum().alias("cost"),
        )
        .sort(["pool", "model"], nulls_last=True)
    )
