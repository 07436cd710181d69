"""The Fleet page's activity heatmaps, from the card-hours the bill prices.

Why from card-hours: a heatmap cell is "how much of the node's cards did work this hour", and
the bill already knows each holder's share of a card (MIG share under `sharing.mig_share_basis`,
time-slice and vGPU fractions) and its active ratio (the activity rule of `core.activity`). So
a cell is Σ card-hours × active ratio over the node's holders in that hour, divided by the
node's cards; an unheld card or slice counts 0. Computing it any other way (a regex on the
profile, slices / 7) made the heatmap disagree with the bill under another share basis.

1. Active card-hours per card and hour, planned as the bill plans its hours
   (`analytics.usage.plan.plan_usage`: the rules stamped on each rolled-up hour against the
   server's): from the stored roll-up (`card_hours_hourly`) for the whole hours it covers under
   the server's rules, from raw samples through `analytics.usage.hourly.hourly_usage` (the roll-up's
   own computation) under the server's rules for the rest, the hours rolled up under other rules
   among them where their raw samples are still there (as the bill does). Where they are gone
   the bill refuses; the heatmap shows them as stored instead (`refuse=False`), and its notes
   say which rules they carry, so a picture never passes for the server's rules unlabelled.
2. Laid on a full grid of the node's (or GPU's) hours up to the newest data, so quiet hours
   show as 0 rather than as gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.window import HOUR, Window, floor_time
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import dashboards as q

ACTIVITY_SCHEMA: dict[str, Any] = {"uuid": pl.String, "node": pl.String, "hour": pl.Datetime("us", "UTC"),
                   "active_card_hours": pl.Float64}


@dataclass(frozen=True)
class HeatHours:
    """Step 1's frame and what its hours rest on (the plan's notes and warnings; empty when
    every hour is the roll-up under the server's rules)."""

    frame: pl.DataFrame
    notes: tuple[str, ...] = ()


def active_card_hours(wh: Warehouse, window: Window, settings: Settings) -> HeatHours:
    """Step 1: `uuid, node, hour, active_card_hours` over `window`, and its notes."""
    from gpuledger.analytics.billing.bill import period_text
    from gpuledger.analytics.usage.hourly import hourly_usage
    from gpuledger.analytics.usage.plan import plan_usage
    from gpuledger.core.rules import Rules

    plan = plan_usage(wh, window, Rules.of(settings), what=f"heatmap {period_text(window)}", refuse=False)
    parts: list[pl.DataFrame] = []
    active = (pl.col("card_hours") * pl.col("active_ratio").fill_null(0.0)).sum().alias("active_card_hours")
    for part in plan.parts:
        lo, hi = part.window.start, part.window.end
        if lo >= hi:
            continue
        if part.source == "rollup":
            parts.append(q.rollup_active_card_hours(wh, lo, hi))
            continue
        hourly = hourly_usage(wh, Window(lo, hi, window.step), plan.compute)
        parts.append(hourly.group_by("uuid", "node", pl.col("ts").alias("hour")).agg(active))
    notes = (*plan.notes, *plan.warnings)
    if not parts:
        return HeatHours(pl.DataFrame(schema=ACTIVITY_SCHEMA), notes)
    frame = pl.concat([p.select([pl.col(c).cast(t) for c, t in ACTIVITY_SCHEMA.items()]) for p in parts])
    return HeatHours(frame, notes)


def hour_grid(window: Window, data_end: datetime | None) -> pl.Series:
    """Step 2's hours: every hour of `window` up to the hour of the newest data."""
    if data_end is None:
        return pl.Series("hour", [], dtype=pl.Datetime("us", "UTC"))
    end = min(window.end, floor_time(data_end, HOUR) + HOUR)
    if end <= window.start:
        return pl.Series("hour", [], dtype=pl.Datetime("us", "UTC"))
    return pl.datetime_range(window.start, end - timedelta(microseconds=1), "1h", time_zone="UTC",
                             eager=True).alias("hour").cast(pl.Datetime("us", "UTC"))


def node_heat(
    activity: pl.DataFrame, gpus: pl.DataFrame, nodes: pl.DataFrame, hours: pl.Series
) -> pl.DataFrame:
    """`node, hour, activity, model, pool`: the node's active card-hours / its cards, by node
    and hour (`gpus` has the inventory's `uuid, node`; `nodes` its `node, model, pool`)."""
    cards = gpus.group_by("node").agg(pl.len().alias("cards"))
    used = activity.group_by("node", "hour").agg(pl.col("active_card_hours").sum())
    grid = cards.join(hours.to_frame(), how="cross")
    heat = (
        grid.join(used, on=["node", "hour"], how="left")
        .select("node", "hour",
                (pl.col("active_card_hours").fill_null(0.0) / pl.col("cards")).alias("activity"))
    )
    return heat.join(nodes.select("node", "model", "pool"), on="node", how="left").sort("node", "hour")


def gpu_heat(activity: pl.DataFrame, gpus: pl.DataFrame, node: str, hours: pl.Series) -> pl.DataFrame:
    """`uuid, hour, activity, gpu_index` for the cards of one node (the heatmap's drill-down)."""
    cards = gpus.filter(pl.col("node") == node).select("uuid", "gpu_index")
    used = (
        activity.filter(pl.col("node") == node)
        .group_by("uuid", "hour").agg(pl.col("active_card_hours").sum())
    )
    return (
        cards.join(hours.to_frame(), how="cross")
        .join(used, on=["uuid", "hour"], how="left")
        .select("uuid", "hour", pl.col("active_card_hours").fill_null(0.0).alias("activity"),
                pl.col("gpu_index").fill_null(-1))
        .sort("gpu_index", "hour")
    )
