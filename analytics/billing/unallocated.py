"""The bill's capacity rows: what nobody held (unallocated, stranded MIG slices counted apart) and
what utilization-billed holders did not pay, each priced at list on the card's `unallocated` line.

Moved out of `analytics.billing.bill` (which prices the allocations) so each stays a readable size; the
rules are the bill's steps 2 and 3 (module docstring of `analytics.billing.bill`). Computed under
the rules the bill's usage was computed under (`core.rules.Rules`: the sampling rules' spacing
and staleness bound, the MIG share basis of the stranded slices), so one bill never mixes the
roll-up's basis with today's (docs/decisions/0147).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.analytics.devices.capacity import instance_share_by_day, presence_by_day
from gpuledger.analytics.devices.replicas import at_day
from gpuledger.core.labels import UNKNOWN
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.capacity import last_spacing


def unpriced_hours() -> pl.Expr:
    """`unpriced_card_hours`: the card-hours of rows whose model has no price anywhere."""
    return pl.when(pl.col("unpriced")).then(pl.col("card_hours")).otherwise(0.0).alias("unpriced_card_hours")


def unallocated_rows(
    wh: Warehouse, usage: pl.DataFrame, gpus: pl.DataFrame, prices: pl.DataFrame,
    *, window: Window, rules: Rules, held: pl.DataFrame | None = None, configs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per card and day: present hours nobody held (never below zero). `configs`: the
    node configurations of `window` (`analytics.devices.replicas.node_configs`), read once by
    the bill."""
    step = timedelta(microseconds=rules.sampling.fallback_spacing_us)
    spacing = last_spacing(wh, window.start, window.end, max_gap_us=rules.sampling.staleness_us)
    presence = presence_by_day(gpus.join(spacing, on="uuid", how="left"), window, step)
    if held is None:
        held = usage.group_by("uuid", "day").agg(
            pl.col("card_hours").sum().alias("held_card_hours"),
            pl.col("node").first().alias("_u_node"), pl.col("model").first().alias("_u_model"),
            pl.col("pool").first().alias("_u_pool"),
        )
    instances = instance_share_by_day(wh, gpus, window, rules.shares.mig_share_basis)
    by_node = [c for c in ("inventory_mode", "inventory_pool") if c in gpus.columns]
    cards = gpus.select(
        "uuid", "gpu_node", pl.col("model").alias("_g_model"), "pool", "card_mode", *by_node,
    )
    # Mode and pool of each card-day as its node was configured that day (docs/decisions/0207).
    days = at_day(presence.join(held, on=["uuid", "day"], how="full", coalesce=True)
                  .join(cards, on="uuid", how="left"), wh, window, configs=configs)
    frame = (
        days.rename({"gpu_node": "_g_node"})
        .with_columns(pl.when(pl.col("card_mode").is_not_null()).then(pl.col("pool").fill_null(UNKNOWN))
                      .alias("_g_pool"))  # an inventoried card without a pool is in `unknown`
        .drop("pool", *by_node)
        .join(instances, on=["uuid", "day"], how="left")
        .with_columns(
            pl.col("present_hours").fill_null(0.0),
            pl.col("held_card_hours").fill_null(0.0),
            pl.coalesce("_g_node", "_u_node").alias("node"),
            pl.coalesce("_g_model", "_u_model").alias("model"),
            pl.coalesce("_g_pool", "_u_pool").alias("pool"),
            pl.col("card_mode").fill_null("exclusive").alias("sharing_mode"),
        )
    )
    capacity = pl.max_horizontal(pl.col("present_hours"), pl.col("held_card_hours"))
    unheld = (capacity - pl.col("held_card_hours")).clip(lower_bound=0.0)
    stranded = pl.when(pl.col("instance_card_hours").is_not_null()).then(
        (pl.col("present_hours") - pl.col("instance_card_hours")).clip(lower_bound=0.0)
    ).otherwise(0.0)
    frame = (
        frame.with_columns(unheld.alias("card_hours"), pl.lit(0.0).alias("held_hours"))
        .with_columns(pl.min_horizontal(stranded, pl.col("card_hours")).alias("stranded_card_hours"))
        .filter(pl.col("card_hours") > 0)
        .join(prices, on=["model", "day"], how="left")
    )
    return _as_unallocated_lines(frame)


def _as_unallocated_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """Card-day rows of unheld hours as the bill's `unallocated` lines: priced at list, nobody's
    namespace or pod, no discount, no idle (nobody held them)."""
    return frame.with_columns(
        pl.lit("unallocated").alias("kind"),
        pl.lit(SpecialLine.UNALLOCATED.value).alias("team"),
        *null_columns(pl.String, "namespace", "pod", "queue", "vgpu", "profile", "claim", "device_class"),
        pl.lit(-1, dtype=pl.Int32).alias("gpu_i_id"),
        *null_columns(pl.Float64, "share", "active_ratio", "fb_used_max_mib"),
        pl.lit(0.0).alias("idle_card_hours"),
        pl.lit(0.0).alias("held_idle_card_hours"),
        pl.lit(0.0).alias("activity_unknown_card_hours"),
        unpriced_hours(),
        pl.lit(1.0).alias("discount_factor"),
        (pl.col("card_hours") * pl.col("unit_price")).alias("list_cost"),
        pl.lit(0.0).alias("sharing_discount"),
        pl.lit(0.0).alias("utilization_adjustment"),
        (pl.col("card_hours") * pl.col("unit_price")).alias("cost"),
        pl.lit(0.0).alias("idle_cost"),
    )


def null_columns(dtype: type[pl.DataType], *names: str) -> list[pl.Expr]:
    """NULL columns of `dtype`, for the detail columns a kind of row does not have."""
    return [pl.lit(None, dtype=dtype).alias(n) for n in names]


def utilization_remainder(allocated: pl.DataFrame) -> pl.DataFrame:
    """What utilization-billed holders did not pay, moved to their card's `unallocated` line."""
    moved = allocated.filter(pl.col("utilization_adjustment") != 0)
    return (
        moved.group_by("day", "uuid", "node", "pool", "model")
        .agg(
            (-pl.col("utilization_adjustment").sum()).alias("utilization_adjustment"),
            pl.col("unit_price").first(),
            pl.col("sharing_mode").first(),
        )
        .with_columns(
            pl.lit("utilization_remainder").alias("kind"),
            pl.lit(SpecialLine.UNALLOCATED.value).alias("team"),
            *null_columns(pl.String, "namespace", "pod", "queue", "vgpu", "profile", "claim", "device_class"),
            pl.lit(-1, dtype=pl.Int32).alias("gpu_i_id"),
            *null_columns(pl.Float64, "share", "active_ratio", "fb_used_max_mib"),
            *[pl.lit(0.0).alias(c) for c in (
                "held_hours", "card_hours", "idle_card_hours", "held_idle_card_hours",
                "stranded_card_hours", "list_cost", "sharing_discount", "idle_cost",
                "activity_unknown_card_hours", "unpriced_card_hours",
            )],
            pl.lit(1.0).alias("discount_factor"),
            pl.col("utilization_adjustment").alias("cost"),
        )
    )


