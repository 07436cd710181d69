"""Screening of parsed samples: time checks and value bounds, vectorized.

1. Clock skew: a sample whose timestamp is off the chunk's step grid, outside the chunk, or
   later than the collector's clock (plus a tolerance) is dropped and counted.
2. Values: NaN/Inf, negative, or above the field's bound become NULL and are counted
   (the row stays: the series existed at that instant).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from gpuledger.collectors.chunks import Chunk

FUTURE_TOLERANCE = timedelta(minutes=2)


def screen(
    samples: pl.DataFrame, chunk: Chunk, now: datetime, bounds: dict[str, tuple[float, float]],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Screen `samples` (columns `field`, `ts`, `value`, ...).

    Returns the kept samples (bad values nulled) and a frame of counts (`field`, `reason`, `n`).
    """
    step_us = int(chunk.step.total_seconds() * 1_000_000)
    start_us = int(chunk.start.timestamp() * 1_000_000)
    ts_us = pl.col("ts").dt.epoch("us")
    skewed = (
        ((ts_us - start_us) % step_us != 0)
        | (pl.col("ts") < chunk.start)
        | (pl.col("ts") >= chunk.end)
        | (pl.col("ts") > now + FUTURE_TOLERANCE)
    )
    lo = pl.col("field").replace_strict({f: b[0] for f, b in bounds.items()}, default=0.0,
                                        return_dtype=pl.Float64)
    hi = pl.col("field").replace_strict({f: b[1] for f, b in bounds.items()}, default=float("inf"),
                                        return_dtype=pl.Float64)
    value = pl.col("value")
    reason = (
        pl.when(skewed).then(pl.lit("clock_skew"))
        .when(value.is_nan() | value.is_infinite()).then(pl.lit("nan"))
        .when(value < lo).then(pl.lit("negative"))
        .when(value > hi).then(pl.lit("out_of_range"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    marked = samples.with_columns(reason.alias("_reason"))
    counts = (
        marked.filter(pl.col("_reason").is_not_null())
        .group_by("field", pl.col("_reason").alias("reason"))
        .agg(pl.len().alias("n"))
    )
    kept = marked.filter(pl.col("_reason").ne("clock_skew").fill_null(True)).with_columns(
        pl.when(pl.col("_reason").is_null()).then(value).otherwise(None).alias("value")
    ).drop("_reason")
    return kept, counts
