"""THE activity rule: how busy a GPU (or MIG instance) was in one sample, from 0 to 1.

DCGM's `GR_ENGINE_ACTIVE` is the truth when the exporter reports it (it is per MIG instance
and time-weighted); old exporters only report `GPU_UTIL` (a percentage), so that is the
fallback. Fleets whose profiling counters are off or unreliable set `idle.activity: gpu_util`
and the rule reads `GPU_UTIL` alone (`core.rules.ActivitySource`; a stored roll-up remembers
which rule it was computed under, docs/decisions/0147). Idle detection, workload profiles and
the dashboards must agree on this, so every SQL or Polars user takes it from here; this module
is the only place that writes "GR_ENGINE_ACTIVE, else GPU_UTIL / 100".

A value that is NaN, infinite or negative is not a reading: exporters emit NaN when a
profiling field is unavailable and blank or garbage values after a driver hiccup, and
counting them as 0 would invent idle time (or as NaN poison every average). Such a value is
treated exactly like a missing one (NULL), so the sampling model can carry the last real
reading over it (`analytics.sampling.sweep`, docs/decisions/0051-sampling-model.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import polars as pl

ActivitySource = Literal["gr_engine_active", "gpu_util"]
"""`gr_engine_active`: DCGM's GR_ENGINE_ACTIVE, else GPU_UTIL / 100 (the default);
`gpu_util`: GPU_UTIL / 100 only (fleets whose profiling counters are off or unreliable)."""

DEFAULT_SOURCE: ActivitySource = "gr_engine_active"

PER_CENT = "_per_cent"
"""Name of the column `per_cent_column` adds: GPU_UTIL's divisor (see there)."""


def fields(source: ActivitySource = DEFAULT_SOURCE) -> tuple[str, ...]:
    """The sample columns the rule reads, first choice first: a later one is read only where
    the earlier ones have no reading (so when the first is never missing, the rest are unread)."""
    return ("gr_engine_active", "gpu_util") if source == "gr_engine_active" else ("gpu_util",)


def describe(source: ActivitySource = DEFAULT_SOURCE) -> str:
    """The rule in a few words, for people (`core.rules.Rules.describe`, the idle listing)."""
    return "GR_ENGINE_ACTIVE else GPU_UTIL" if source == "gr_engine_active" else "GPU_UTIL"


# SQL ------------------------------------------------------------------------------------


def reading_sql(column: str) -> str:
    """`column` as a reading: its value when finite and not negative, else NULL."""
    return f"CASE WHEN isfinite({column}) AND {column} >= 0 THEN {column} END"


def activity_of(gr_engine_active: str, gpu_util: str, source: ActivitySource = DEFAULT_SOURCE) -> str:
    """The rule over two SQL expressions that are already readings (NULL when missing)."""
    if source == "gpu_util":
        return f"({gpu_util} / 100.0)"
    return f"coalesce({gr_engine_active}, {gpu_util} / 100.0)"


def activity_sql(alias: str | None = None, source: ActivitySource = DEFAULT_SOURCE) -> str:
    """The rule as a SQL expression, its columns qualified by `alias` (`s` -> `s.gpu_util`)."""
    prefix = f"{alias}." if alias else ""
    return activity_of(reading_sql(f"{prefix}gr_engine_active"), reading_sql(f"{prefix}gpu_util"), source)


ACTIVITY_SQL = activity_sql()


# Polars ---------------------------------------------------------------------------------


def per_cent_column(height: int) -> pl.Series:
    """GPU_UTIL's divisor, 100.0, as a column of `height` rows named `PER_CENT`.

    A column, not a literal: Polars turns a division by a literal (even `pl.repeat(100.0,
    pl.len())`) into a multiplication by its reciprocal, one ulp off SQL's IEEE division in
    about a seventh of the values, and the sample pass must give SQL's numbers exactly."""
    import polars as pl

    return pl.repeat(100.0, height, dtype=pl.Float64, eager=True).alias(PER_CENT)


def activity_of_exprs(
    gr_engine_active: pl.Expr, gpu_util: pl.Expr, source: ActivitySource = DEFAULT_SOURCE,
    *, per_cent: pl.Expr | None = None,
) -> pl.Expr:
    """The rule over two Polars expressions that are already readings (unnamed).

    `per_cent`: the divisor of GPU_UTIL; pass `pl.col(PER_CENT)` after adding
    `per_cent_column` to get SQL's numbers to the last bit (the sample pass does); the literal
    100.0 otherwise."""
    import polars as pl

    util = gpu_util / (per_cent if per_cent is not None else pl.lit(100.0))
    return util if source == "gpu_util" else pl.coalesce(gr_engine_active, util)


def reading_expr(column: str) -> pl.Expr:
    """`column` as a reading in Polars (the twin of `reading_sql`)."""
    import polars as pl

    col = pl.col(column)
    return pl.when(col.is_finite() & (col >= 0)).then(col).otherwise(None)


def activity_expr(source: ActivitySource = DEFAULT_SOURCE) -> pl.Expr:
    """The rule as a Polars expression over `gr_engine_active` and `gpu_util` (unnamed)."""
    return activity_of_exprs(reading_expr("gr_engine_active"), reading_expr("gpu_util"), source)
