"""Kueue's Prometheus metrics → `queue_samples`.

Usage and nominal quota are per (ClusterQueue, flavor, resource). Pending workloads and the
admission wait are per ClusterQueue only; they go on a row with `flavor = ''` and
`resource = ''`, so summing usage over flavors never double-counts them. The admission wait is
pushed to the engine: the mean wait of workloads admitted in the last two steps is
`increase(sum) / increase(count)` over the histogram (no row when nothing was admitted).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import polars as pl

from collectors.chunks import Chunk
from collectors.prom_parse import Matrix
from collectors.promql import duration, latest
from collectors.quality import Quality
from collectors.tabulate import tabulate
from core.frames import QUEUE_SAMPLES, polars_schema

LABELS: tuple[str, ...] = ("cluster_queue", "flavor", "resource")
BOUNDS = {
    "usage": (0.0, float("inf")), "nominal_quota": (0.0, float("inf")),
    "pending_workloads": (0.0, float("inf")), "admission_wait_s": (0.0, float("inf")),
}


def queries(step: timedelta) -> dict[str, str]:
    """PromQL per `queue_samples` column."""
    wait = duration(2 * step)
    hist = "kueue_admission_wait_time_seconds"
    return {
        "usage": latest("kueue_cluster_queue_resource_usage", step),
        "nominal_quota": latest("kueue_cluster_queue_nominal_quota", step),
        "pending_workloads": f"sum by (cluster_queue) ({latest('kueue_pending_workloads', step)})",
        "admission_wait_s": (
            f"sum by (cluster_queue) (increase({hist}_sum[{wait}])) / "
            f"(sum by (cluster_queue) (increase({hist}_count[{wait}])) > 0)"
        ),
    }


def build_queue_samples(
    matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality,
) -> pl.DataFrame:
    keys = {
        "cluster_queue": pl.col("cluster_queue"),
        "flavor": pl.col("flavor").fill_null(""),
        "resource": pl.col("resource").fill_null(""),
    }
    wide = tabulate(matrices, LABELS, keys, BOUNDS, chunk=chunk, now=now, table=QUEUE_SAMPLES.name,
                    quality=quality)
    schema = polars_schema(QUEUE_SAMPLES)
    return wide.select(
        *(pl.col(c).cast(schema[c]) if c in wide.columns else pl.lit(None, schema[c]).alias(c)
          for c in QUEUE_SAMPLES.column_names)
    )
