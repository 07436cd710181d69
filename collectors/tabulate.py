"""Per-field range answers → one wide row per (key, instant), screened and deduplicated.

Used for the small tables (tokens, queues); `dcgm` has its own richer version (device
attributes). Steps: stack matrices with a `field` column; compute key columns from labels
once per series (rows with a NULL key are unattributable); screen; keep one sample per
(key, instant, field), counting the rest as duplicates; pivot fields to columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import Matrix
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.screen import screen


def tabulate(
    matrices: Mapping[str, Matrix], labels: Sequence[str], keys: Mapping[str, pl.Expr],
    bounds: Mapping[str, tuple[float, float]], *, chunk: Chunk, now: datetime, table: str,
    quality: Quality,
) -> pl.DataFrame:
    """Columns: `ts`, the key columns, one column per field present."""
    series_parts, sample_parts, offset = [], [], 0
    for field_name, m in matrices.items():
        series_parts.append(m.series.select(
            (pl.col("sid") + offset).alias("sid"),
            *(pl.col(c) if c in m.series.columns else pl.lit(None, pl.String).alias(c) for c in labels),
        ))
        sample_parts.append(m.samples.with_columns((pl.col("sid") + offset).alias("sid"),
                                                   pl.lit(field_name).alias("field")))
        offset += m.series.height
    key_names = list(keys)
    if not series_parts or offset == 0:
        return pl.DataFrame(schema={"ts": pl.Datetime("us", "UTC"), **{k: pl.String for k in key_names}})
    series = pl.concat(series_parts).select("sid", *(expr.alias(name) for name, expr in keys.items()))
    samples = pl.concat(sample_parts).join(series, on="sid")
    unkeyed = pl.any_horizontal(*(pl.col(k).is_null() for k in key_names))
    lost = samples.filter(unkeyed).group_by("field").agg(pl.len().alias("n"))
    quality.add_frame(table, lost.with_columns(pl.lit("unattributable").alias("reason")))
    samples, bad = screen(samples.filter(~unkeyed), chunk, now, dict(bounds))
    quality.add_frame(table, bad)
    samples = samples.sort(*key_names, "ts", "field", "sid")
    extra = ~samples.select(pl.struct(*key_names, "ts", "field").is_first_distinct()).to_series()
    dup = samples.filter(extra & pl.col("value").is_not_null()).group_by("field").agg(pl.len().alias("n"))
    quality.add_frame(table, dup.with_columns(pl.lit("duplicate_series").alias("reason")))
    samples = samples.filter(~extra)
    if samples.height == 0:
        return pl.DataFrame(schema={"ts": pl.Datetime("us", "UTC"), **{k: pl.String for k in key_names}})
    return samples.pivot(on="field", index=[*key_names, "ts"], values="value", aggregate_function="first")
