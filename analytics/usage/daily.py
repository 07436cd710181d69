"""Card-hours per UTC day, device and holder: what the bill prices.

Two sources give the same numbers under the same rules: the stored hourly roll-up (table
`card_hours_hourly`, kept after raw samples age out; fast for a month of a large fleet) and the
raw samples (computed on the fly by `analytics.usage.hourly`). Which hours come from which, and
under which rules, is `analytics.usage.plan`'s to say (the roll-up stands in for raw samples
only for hours rolled up under the rules in force, docs/decisions/0147); this module reads the
parts it is given and merges them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import polars as pl

from gpuledger.analytics.usage.hourly import hourly_usage
from gpuledger.core.frames import CARD_HOURS_HOURLY
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import usage as q
from gpuledger.warehouse.utc_sql import DAY_US

Source = Literal["auto", "raw", "rollup"]
ROLLUP_SOURCE = CARD_HOURS_HOURLY.name
"""Watermark name: every hour before it is in the roll-up."""

KEYS: tuple[str, ...] = (
    "day", "uuid", "gpu_i_id", "vgpu", "profile", "node", "model", "pool", "sharing_mode",
    "namespace", "pod", "queue",
)


@dataclass(frozen=True, slots=True)
class Part:
    """Hours of a window read from one source: the stored roll-up or raw samples."""

    window: Window
    source: Literal["rollup", "raw"]


def _active_ratio() -> pl.Expr:
    """Held-hour weighted mean of `active_ratio` over the rows that know it; NULL (activity
    unknown, docs/decisions/0051) when none does, never 0/0 = NaN."""
    known = pl.col("active_ratio").is_not_null()
    held_known = pl.when(known).then(pl.col("held_hours")).sum()
    ratio = (pl.col("held_hours") * pl.col("active_ratio")).sum() / held_known
    return pl.when(held_known > 0).then(ratio).otherwise(None).alias("active_ratio")


def _aggregates() -> list[pl.Expr]:
    return [
        pl.col("held_hours").sum(),
        pl.col("card_hours").sum(),
        pl.col("idle_card_hours").sum(),
        pl.col("held_idle_card_hours").sum(),
        (pl.col("card_hours") * pl.col("active_ratio").fill_null(1.0)).sum().alias("weighted_card_hours"),
        _unknown_card_hours(),
        _active_ratio(),
        pl.col("fb_used_max_mib").max(),
    ]


def _unknown_card_hours() -> pl.Expr:
    """Card-hours with no activity reading at all (`active_ratio` NULL: activity unknown)."""
    unknown = pl.col("active_ratio").is_null()
    held = pl.when(unknown).then(pl.col("card_hours")).otherwise(0.0)
    return held.sum().alias("activity_unknown_card_hours")


def _from_raw(wh: Warehouse, window: Window, rules: Rules, gpus: pl.DataFrame | None = None,
              configs: pl.DataFrame | None = None) -> pl.DataFrame:
    hourly = hourly_usage(wh, window, rules, gpus=gpus, configs=configs)
    return (
        hourly.with_columns(pl.col("ts").dt.date().alias("day"))
        .group_by(list(KEYS))
        .agg(_aggregates())
    )


def _from_rollup(wh: Warehouse, window: Window) -> pl.DataFrame:
    return _day(q.rollup_usage(wh, window.start, window.end))


def _day(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        (pl.col("day_no").cast(pl.Int64) * DAY_US).cast(pl.Datetime("us", "UTC")).dt.date().alias("day")
    ).drop("day_no")


def coarse_usage_from_rollup(
    wh: Warehouse, window: Window, keys: Sequence[str], cuts: Sequence[datetime] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Roll-up usage summed per day and `keys` only (no device x holder grain), plus the
    card-hours held per card and day that unallocated capacity needs.

    With `cuts` (the moments a price may change, `analytics.billing.prices.price_changes`) the usage
    is summed per period between them instead of per day, its `day` the period's first day:
    the same money, 30 times fewer rows for a month at one price (docs/decisions/0133).
    """
    usage = _normalize(_day(q.rollup_usage(wh, window.start, window.end, keys, cuts)))
    return usage, card_day_held(wh, window)


def card_day_held(wh: Warehouse, window: Window) -> pl.DataFrame:
    """`uuid`, `day`, `held_card_hours` (+ the roll-up's names of cards the inventory lacks:
    `_u_node`, `_u_model`, `_u_pool`) from the roll-up, what the bill's unallocated rows need;
    summed in SQL rather than from a device-grain usage frame of millions of rows."""
    held = _day(q.card_day_held(wh, window.start, window.end))
    unknown = held.select("uuid").unique().join(q.complete_cards(wh), on="uuid", how="anti")["uuid"].to_list()
    names = q.rollup_card_names(wh, window.start, window.end, unknown) if unknown else pl.DataFrame(
        schema={"uuid": pl.String, "_u_node": pl.String, "_u_model": pl.String, "_u_pool": pl.String}
    )
    return held.join(names, on="uuid", how="left")


def usage_of(
    wh: Warehouse, parts: Sequence[Part], rules: Rules, *, gpus: pl.DataFrame | None = None,
    configs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Day-level usage of `parts` (raw parts computed under `rules`), rows of one
    day-device-holder that two parts cut merged; `gpus`: the bill's card inventory
    (`analytics.devices.replicas.cards`) and `configs` its node configurations
    (`node_configs` of the bill's window), handed to the raw parts so they are read once."""
    frames = [
        _normalize(_from_rollup(wh, p.window) if p.source == "rollup"
                   else _from_raw(wh, p.window, rules, gpus, configs))
        for p in parts
    ]
    if not frames:
        return _normalize(pl.DataFrame())
    merged = pl.concat(frames, how="vertical")
    return _regroup(merged) if len(frames) > 1 else merged


def _regroup(frame: pl.DataFrame) -> pl.DataFrame:
    """Merge rows of one day-device-holder that came from two sources (a day cut by an edge)."""
    return _normalize(
        frame.group_by(list(KEYS)).agg(
            pl.col("held_hours").sum(),
            pl.col("card_hours").sum(),
            pl.col("idle_card_hours").sum(),
            pl.col("held_idle_card_hours").sum(),
            pl.col("weighted_card_hours").sum(),
            pl.col("activity_unknown_card_hours").sum(),
            _active_ratio(),
            pl.col("fb_used_max_mib").max(),
        )
    )


_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.Date(), "uuid": pl.String(), "gpu_i_id": pl.Int32(), "vgpu": pl.String(),
    "profile": pl.String(), "node": pl.String(), "model": pl.String(), "pool": pl.String(),
    "sharing_mode": pl.String(), "namespace": pl.String(), "pod": pl.String(),
    "queue": pl.String(), "held_hours": pl.Float64(), "card_hours": pl.Float64(),
    "idle_card_hours": pl.Float64(), "held_idle_card_hours": pl.Float64(),
    "weighted_card_hours": pl.Float64(), "activity_unknown_card_hours": pl.Float64(),
    "active_ratio": pl.Float64(), "fb_used_max_mib": pl.Float64(),
}


def _normalize(frame: pl.DataFrame) -> pl.DataFrame:
    """The usage schema; key columns a coarse query did not group by are NULL."""
    if frame.is_empty() and not frame.columns:
        return pl.DataFrame(schema=_SCHEMA)
    return frame.select([
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c) for c, t in _SCHEMA.items()
    ])
