"""Kueue's Prometheus metrics → `queue_samples` (same shape as the simulator's frames).

Usage and nominal quota are per (ClusterQueue, flavor, resource). Pending workloads and the
admission wait are per ClusterQueue; like the simulator (and the bill's queue views), they
are repeated on every (flavor, resource) row of their ClusterQueue at that instant, so never
sum them across a queue's rows. A ClusterQueue with no usage/quota series gets one row with
`flavor = ''` and `resource = ''`.

The admission wait is pushed to the engine: the mean wait of workloads admitted in the step
ending at each instant is the step's increase of the histogram's `_sum` over that of its
`_count` (`x - x offset step`, no extrapolation); instants without admissions give no value.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import Matrix
from gpuledger.collectors.promql import latest
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.tabulate import tabulate
from gpuledger.core.frames import QUEUE_SAMPLES, polars_schema

LABELS: tuple[str, ...] = ("cluster_queue", "flavor", "resource")
KEY_FIELDS = ("usage", "nominal_quota")
QUEUE_FIELDS = ("pending_workloads", "admission_wait_s")
BOUNDS = {name: (0.0, float("inf")) for name in (*KEY_FIELDS, *QUEUE_FIELDS)}


def queries(step: timedelta) -> dict[str, str]:
    """PromQL per `queue_samples` column."""
    hist = "kueue_admission_wait_time_seconds"

    def step_increase(metric: str) -> str:
        now = f"sum by (cluster_queue) ({latest(metric, step)})"
        before = f"sum by (cluster_queue) ({latest(metric, step, offset=step)})"
        return f"({now} - {before})"

    return {
        "usage": latest("kueue_cluster_queue_resource_usage", step),
        "nominal_quota": latest("kueue_cluster_queue_nominal_quota", step),
        "pending_workloads": f"sum by (cluster_queue) ({latest('kueue_pending_workloads', step)})",
        "admission_wait_s": f"{step_increase(hist + '_sum')} / ({step_increase(hist + '_count')} > 0)",
    }


def build_queue_samples(
    matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality,
) -> pl.DataFrame:
    table = QUEUE_SAMPLES.name
    per_key = tabulate(
        {k: m for k, m in matrices.items() if k in KEY_FIELDS}, LABELS,
        {"cluster_queue": pl.col("cluster_queue"), "flavor": pl.col("flavor").fill_null(""),
         "resource": pl.col("resource").fill_null("")},
        BOUNDS, chunk=chunk, now=now, table=table, quality=quality,
    )
    per_queue = tabulate(
        {k: m for k, m in matrices.items() if k in QUEUE_FIELDS}, LABELS,
        {"cluster_queue": pl.col("cluster_queue")}, BOUNDS, chunk=chunk, now=now, table=table,
        quality=quality,
    )
    wide = per_key.join(per_queue, on=["cluster_queue", "ts"], how="full", coalesce=True)
    wide = wide.with_columns(
        *(pl.col(c).fill_null("") for c in ("flavor", "resource") if c in wide.columns)
    )
    schema = polars_schema(QUEUE_SAMPLES)
    return wide.select(
        *(pl.col(c).cast(schema[c]) if c in wide.columns else pl.lit(None, schema[c]).alias(c)
          for c in QUEUE_SAMPLES.column_names)
    ).sort("ts", "cluster_queue", "flavor", "resource")
