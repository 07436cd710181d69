"""THE activity rule: how busy a GPU (or MIG instance) was in one sample, from 0 to 1.

DCGM's `GR_ENGINE_ACTIVE` is the truth when the exporter reports it (it is per MIG instance
and time-weighted); old exporters only report `GPU_UTIL` (a percentage), so that is the
fallback. Idle detection, workload profiles and the dashboards must agree on this, so every
SQL or Polars user takes it from here.

A value that is NaN, infinite or negative is not a reading: exporters emit NaN when a
profiling field is unavailable and blank or garbage values after a driver hiccup, and
counting them as 0 would invent idle time (or as NaN poison every average). Such a value is
treated exactly like a missing one (NULL), so the sampling model can carry the last real
reading over it (`analytics.sampling.model`, docs/decisions/0051-sampling-model.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


def reading_sql(column: str) -> str:
    """`column` as a reading: its value when finite and not negative, else NULL."""
    return f"CASE WHEN isfinite({column}) AND {column} >= 0 THEN {column} END"


def activity_of(gr_engine_active: str, gpu_util: str) -> str:
    """The rule over two SQL expressions that are already readings (NULL when missing)."""
    return f"coalesce({gr_engine_active}, {gpu_util} / 100.0)"


def activity_sql(alias: str | None = None) -> str:
    """The rule as a SQL expression, its columns qualified by `alias` (`s` -> `s.gpu_util`)."""
    prefix = f"{alias}." if alias else ""
    return activity_of(reading_sql(f"{prefix}gr_engine_active"), reading_sql(f"{prefix}gpu_util"))


ACTIVITY_SQL = activity_sql()


def reading_expr(column: str) -> pl.Expr:
    """`column` as a reading in Polars (the twin of `reading_sql`)."""
    import polars as pl

    col = pl.col(column)
    return pl.when(col.is_finite() & (col >= 0)).then(col).otherwise(None)


def activity_expr() -> pl.Expr:
    """The rule as a Polars expression over `gr_engine_active` and `gpu_util` (unnamed)."""
    import polars as pl

    return pl.coalesce(reading_expr("gr_engine_active"), reading_expr("gpu_util") / 100.0)
