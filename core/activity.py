"""THE activity rule: how busy a GPU (or MIG instance) was in one sample, from 0 to 1.

DCGM's `GR_ENGINE_ACTIVE` is the truth when the exporter reports it (it is per MIG instance
and time-weighted); old exporters only report `GPU_UTIL` (a percentage), so that is the
fallback. Idle detection, workload profiles and the dashboards must agree on this, so every
SQL or Polars user takes it from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

ACTIVITY_SQL = "coalesce(gr_engine_active, gpu_util / 100.0)"


def activity_sql(alias: str | None = None) -> str:
    """The rule as a SQL expression, its columns qualified by `alias` (`s` -> `s.gpu_util`)."""
    if not alias:
        return ACTIVITY_SQL
    return f"coalesce({alias}.gr_engine_active, {alias}.gpu_util / 100.0)"


def activity_expr() -> pl.Expr:
    """The rule as a Polars expression over `gr_engine_active` and `gpu_util` (unnamed)."""
    import polars as pl

    return pl.coalesce(pl.col("gr_engine_active"), pl.col("gpu_util") / 100.0)
