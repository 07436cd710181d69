"""Kueue's Prometheus metrics → `queue_samples` (same shape as the simulator's frames).

Usage and nominal quota are per (ClusterQueue, flavor, resource). Pending workloads and the
admission wait are per ClusterQueue; like the simulator (and the bill's queue views), they
are repeated on every (flavor, resource) row of their ClusterQueue at that instant, so never
sum them across a queue's rows. A ClusterQueue with no usage/quota series gets one row with
`flavor = ''` and `resource = ''`.

The admission wait is pushed to the engine: the mean wait of workloads admitted in the step
ending at each instant is the step's increase of the histogram's `_sum` over that of its
`_count` (`x - x offset step`, no extrapolation); instants without admissions give no value.

HA Prometheus pairs answer every series twice, once per replica label
(`prom_parse.REPLICA_LABELS`). The per-queue sums therefore keep the replica labels
(`sum by (cluster_queue, replica, ...)`): summed across replicas, a queue's pending workloads
would double. Each answer's copies are then merged by the one HA rule
(`prom_parse.merge_replicas`) and counted `ha_duplicate`, never `duplicate_series`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import REPLICA_LABELS, Matrix, merge_replica_fields
from gpuledger.collectors.promql import latest
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.tabulate import tabulate
from gpuledger.core.frames import QUEUE_SAMPLES, polars_schema

KEY_LABELS: tuple[str, ...] = ("cluster_queue", "flavor", "resource")
"""The labels that name a queue row."""
LABELS: tuple[str, ...] = (*KEY_LABELS, *REPLICA_LABELS)
"""The labels fetched: the key's, then the default replica labels."""
KEY_FIELDS = ("usage", "nominal_quota")
QUEUE_FIELDS = ("pending_workloads", "admission_wait_s")
BOUNDS = {name: (0.0, float("inf")) for name in (*KEY_FIELDS, *QUEUE_FIELDS)}


def queries(step: timedelta, replica_labels: Sequence[str] = REPLICA_LABELS) -> dict[str, str]:
    """PromQL per `queue_samples` column; the per-queue sums are per replica (module docstring)."""
    hist = "kueue_admission_wait_time_seconds"
    by = f"sum by ({', '.join(('cluster_queue', *replica_labels))})"

    def step_increase(metric: str) -> str:
        now = f"{by} ({latest(metric, step)})"
        before = f"{by} ({latest(metric, step, offset=step)})"
        return f"({now} - {before})"

    return {
        "usage": latest("kueue_cluster_queue_resource_usage", step),
        "nominal_quota": latest("kueue_cluster_queue_nominal_quota", step),
        "pending_workloads": f"{by} ({latest('kueue_pending_workloads', step)})",
        "admission_wait_s": f"{step_increase(hist + '_sum')} / ({step_increase(hist + '_count')} > 0)",
    }


def build_queue_samples(
    matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality, *,
    replica_labels: Sequence[str] = REPLICA_LABELS,
) -> pl.DataFrame:
    """The answers to `queries` → `queue_samples` rows, HA copies merged first."""
    table = QUEUE_SAMPLES.name
    matrices = merge_replica_fields(matrices, replica_labels, quality, table)
    per_key = tabulate(
        {k: m for k, m in matrices.items() if k in KEY_FIELDS}, KEY_LABELS,
        {"cluster_queue": pl.col("cluster_queue"), "flavor": pl.col("flavor").fill_null(""),
         "resource": pl.col("resource").fill_null("")},
        BOUNDS, chunk=chunk, now=now, table=table, quality=quality,
    )
    per_queue = tabulate(
        {k: m for k, m in matrices.items() if k in QUEUE_FIELDS}, KEY_LABELS,
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
