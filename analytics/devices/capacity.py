"""The fleet's capacity: which cards were present when, and MIG slices no instance covers.

A card counts from its inventory `first_seen` to `last_seen` plus what its last observation
stands for (either missing: the window's edge): the card's own sample spacing when the `gpus`
frame carries it (`spacing_us`), else the caller's fallback, which is the sampling model's
fallback spacing, never `prometheus.step` (docs/decisions/0051-sampling-model.md). The bill
makes sure capacity is never below the card-hours held on a card in a day, so a stale
inventory cannot make cost disappear. Stranded MIG capacity is the part of a present MIG card
that no GPU instance covers (from table `mig_instances`, at the configured share basis), e.g.
one compute slice on a card laid out as 3g + 3g.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from gpuledger.analytics.devices.shares import raw_mig_share
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.devices import mig_instances_between


def _days(window: Window) -> pl.DataFrame:
    days = list(window.days())
    return pl.DataFrame(
        {
            "day": [d.start.date() for d in days],
            "d0": [d.start for d in days],
            "d1": [d.end for d in days],
        },
        schema={"day": pl.Date, "d0": pl.Datetime("us", "UTC"), "d1": pl.Datetime("us", "UTC")},
    )


def _overlap_hours(a0: str, a1: str, b0: str, b1: str) -> pl.Expr:
    span = pl.min_horizontal(pl.col(a1), pl.col(b1)) - pl.max_horizontal(pl.col(a0), pl.col(b0))
    return (span.dt.total_microseconds() / 3.6e9).clip(lower_bound=0.0)


def presence_by_day(gpus: pl.DataFrame, window: Window, step: timedelta) -> pl.DataFrame:
    """`uuid`, `day`, `present_hours` for every inventoried card and day of the window.

    `last_seen` is the last observation, which stands for the card's sample spacing like a
    sample (`spacing_us` when `gpus` has it and knows it, else `step`, the fallback spacing).
    """
    tail = pl.lit(step)
    if "spacing_us" in gpus.columns:
        own = pl.duration(microseconds=pl.col("spacing_us").cast(pl.Int64))
        tail = pl.when(pl.col("spacing_us").is_not_null()).then(own).otherwise(pl.lit(step))
    cards = gpus.select(
        "uuid",
        pl.col("first_seen").fill_null(window.start).alias("p0"),
        (pl.col("last_seen") + tail).fill_null(window.end).alias("p1"),
    ).with_columns(
        pl.max_horizontal(pl.col("p0"), pl.lit(window.start)).alias("p0"),
        pl.min_horizontal(pl.col("p1"), pl.lit(window.end)).alias("p1"),
    )
    days = _days(window).with_columns(
        pl.max_horizontal(pl.col("d0"), pl.lit(window.start)).alias("d0"),
        pl.min_horizontal(pl.col("d1"), pl.lit(window.end)).alias("d1"),
    )
    return (
        cards.join(days, how="cross")
        .with_columns(_overlap_hours("p0", "p1", "d0", "d1").alias("present_hours"))
        .filter(pl.col("present_hours") > 0)
        .select("uuid", "day", "present_hours")
    )


def instance_share_by_day(
    wh: Warehouse, gpus: pl.DataFrame, window: Window, basis: str
) -> pl.DataFrame:
    """`uuid`, `day`, `instance_card_hours`: card-hours covered by MIG instances per card-day."""
    frame = mig_instances_between(wh, window.start, window.end)
    if frame.is_empty():
        return pl.DataFrame(
            schema={"uuid": pl.String, "day": pl.Date, "instance_card_hours": pl.Float64}
        )
    models = gpus.select("uuid", "model")
    days = _days(window)
    spans = (
        frame.join(models, on="uuid", how="inner")
        .with_columns(
            pl.max_horizontal(pl.col("start_ts"), pl.lit(window.start)).alias("s0"),
            pl.min_horizontal(pl.col("end_ts"), pl.lit(window.end)).alias("s1"),
        )
        .join(days, how="cross")
        .filter((pl.col("s0") < pl.col("d1")) & (pl.col("s1") > pl.col("d0")))
        .with_columns(_overlap_hours("s0", "s1", "d0", "d1").alias("hours"))
    )
    # Raw shares: where a layout sums past one card (max_normalized) nothing is stranded, and
    # the caller clamps instance card-hours to the card's presence.
    shares = {
        (m, p): raw_mig_share(m, p, basis)
        for m, p in spans.select("model", "profile").unique().iter_rows()
    }
    share_frame = pl.DataFrame(
        [(m, p, s) for (m, p), s in shares.items()],
        schema={"model": pl.String, "profile": pl.String, "share": pl.Float64}, orient="row",
    )
    return (
        spans.join(share_frame, on=["model", "profile"], how="left")
        .group_by("uuid", "day")
        .agg((pl.col("hours") * pl.col("share")).sum().alias("instance_card_hours"))
    )

