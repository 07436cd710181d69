"""The derived tables `allocations` and `card_hours_hourly`, as frames the roof loads.

The roll-up is computed from raw samples one window at a time (normally a UTC day, as the
collector closes it) and loaded with the `card_hours_hourly` watermark, so bills over long
periods read the small hourly table instead of every sample (`analytics.usage.daily`). A window
must start and end on the hour: the roll-up's rows are whole hours.

Both frames come from ONE evaluation of the sample pass (`analytics.sampling.sweep`, decision
0072: the pass is most of the roll-up's time, and running it once per frame paid for it twice);
since decision 0122 the pass sorts the window's rows once and works on integer arrays, so a
roll-up costs about what reading its rows costs, and one hour's roll-up about an hour's rows
plus the margin the model reads on each side.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from gpuledger.analytics.sampling import sweep
from gpuledger.analytics.sampling.model import (
    SampleRules,
    allocation_frame,
    allocation_runs,
    hourly_frame,
    params,
)
from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
from gpuledger.analytics.usage.hourly import hourly_usage
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.frames import ALLOCATIONS, polars_schema
from gpuledger.core.window import DAY, HOUR, Window, as_utc, floor_time
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.retention import CompactionStats, compact


def held_and_runs(wh: Warehouse, window: Window, rules: SampleRules) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`sampling.model.held_hourly` and `sampling.model.allocation_runs` of `window`, from one pass."""
    pieces = sweep.run(wh, params(window, rules))
    return hourly_frame(pieces), allocation_frame(pieces)


def allocations_frame(
    wh: Warehouse, window: Window, settings: Settings, hourly: pl.DataFrame | None = None,
    runs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Table `allocations`: each holder's run on a device, split at UTC midnight."""
    runs = runs if runs is not None else allocation_runs(wh, window, SampleRules.of(settings))
    schema = polars_schema(ALLOCATIONS)
    if runs.is_empty():
        return pl.DataFrame(schema=schema)
    hourly = hourly if hourly is not None else hourly_usage(wh, window, settings)
    keys = ["uuid", "gpu_i_id", "vgpu", "namespace", "pod"]
    facts = hourly.group_by(keys).agg(
        (pl.col("card_hours").sum() / pl.col("held_hours").sum()).alias("share"),
        pl.col("sharing_mode").first(),
        pl.col("queue").first(),
    )
    # Split at midnight: one row per allocation and day it touches.
    runs = runs.with_columns(
        pl.datetime_ranges(
            pl.col("start_ts").dt.truncate("1d"), pl.col("end_ts") - timedelta(microseconds=1),
            interval="1d", time_zone="UTC",
        ).alias("day")
    ).explode("day")
    runs = runs.with_columns(
        pl.max_horizontal(pl.col("start_ts"), pl.col("day")).alias("ts"),
        pl.min_horizontal(pl.col("end_ts"), pl.col("day") + DAY).alias("end_ts"),
    )
    frame = runs.join(facts, on=keys, how="left", nulls_equal=True).with_columns(
        pl.col("share").fill_null(1.0), pl.col("sharing_mode").fill_null("exclusive")
    )
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()]).sort(
        ["ts", "uuid", "gpu_i_id", "vgpu"], nulls_last=True
    )


def rollup_frames(wh: Warehouse, window: Window, settings: Settings) -> dict[str, pl.DataFrame]:
    """Frames for tables `card_hours_hourly` and `allocations` over an hour-aligned window."""
    if floor_time(window.start, HOUR) != window.start or floor_time(window.end, HOUR) != window.end:
        raise InputError(f"roll-up window {window}: must start and end on the hour")
    held, runs = held_and_runs(wh, window, SampleRules.of(settings))
    hourly = hourly_usage(wh, window, settings, held)
    return {
        "card_hours_hourly": hourly,
        "allocations": allocations_frame(wh, window, settings, hourly, runs),
    }


def rollup_batch(wh: Warehouse, window: Window, settings: Settings) -> LoadBatch:
    """A batch the roof loads (with a writer) to store the roll-up of `window`.

    It moves the `card_hours_hourly` watermark to the window's end: roll up windows in order.
    """
    return LoadBatch(
        frames=rollup_frames(wh, window, settings), window=window,
        watermarks={ROLLUP_SOURCE: window.end},
    )


def compact_raw_samples(wh: Warehouse, settings: Settings, now: datetime) -> CompactionStats:
    """Age raw GPU samples out (`warehouse.retention`, docs/decisions/0071): keep the last
    `retention.raw_days` whole UTC days, plus the sample pass's margin before them, and
    nothing the roll-up does not hold. What `gpuledger compact` and a scheduled job call."""
    keep_from = floor_time(as_utc(now), DAY) - timedelta(days=settings.retention.raw_days)
    margin = SampleRules.of(settings).margin
    return compact(wh, keep_from, margin=margin, rollup_source=ROLLUP_SOURCE)
