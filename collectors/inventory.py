"""Inventory seen through the metrics: GPUs, MIG instances and nodes from dcgm-exporter series.

This is what a Prometheus-only setup knows about the fleet; the Kubernetes API collector adds
richer node facts when it is reachable (the pipeline merges, so neither erases the other).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from gpuledger.core.frames import GPUS, MIG_INSTANCES, NODES, polars_schema
from gpuledger.core.mig import canonical_model


def _cast(frame: pl.DataFrame, spec_columns: tuple[str, ...], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """`frame` in the table's columns and types; an empty input stays empty.

    (Selecting only literals from a frame without rows gives ONE all-null row: a chunk without
    GPU series once became a `gpus` row with a NULL uuid and stopped collection for good.)"""
    if frame.height == 0:
        return pl.DataFrame(schema={c: schema[c] for c in spec_columns})
    return frame.select(
        *(pl.col(c).cast(schema[c]) if c in frame.columns else pl.lit(None, schema[c]).alias(c)
          for c in spec_columns)
    )


def gpus_from_devices(devices: pl.DataFrame) -> pl.DataFrame:
    """One row per physical GPU (parent UUID)."""
    if devices.height == 0:
        return _cast(pl.DataFrame(), GPUS.column_names, polars_schema(GPUS))
    whole = pl.col("gpu_i_id") < 0
    grouped = devices.sort("last_ts").group_by("uuid").agg(
        pl.col("node").last(),
        pl.col("gpu_index").drop_nulls().last(),
        pl.col("model_name").drop_nulls().last(),
        pl.col("fb_total_mib").filter(whole).max().alias("memory_mib"),
        (pl.col("gpu_i_id") >= 0).any().alias("_mig"),
        pl.col("vgpu").drop_nulls().n_unique().alias("_replicas"),
        pl.col("first_ts").min().alias("first_seen"),
        pl.col("last_ts").max().alias("last_seen"),
    )
    out = grouped.with_columns(
        pl.col("gpu_index").fill_null(-1),
        pl.col("model_name").map_elements(canonical_model, return_dtype=pl.String)
        .fill_null("unknown").alias("model"),
        pl.when(pl.col("_mig")).then(pl.lit("mig"))
        .when(pl.col("_replicas") > 0).then(pl.lit("timeslice"))
        .otherwise(pl.lit("exclusive")).alias("sharing_mode"),
        pl.when(pl.col("_replicas") > 0).then(pl.col("_replicas")).otherwise(None).alias("replicas"),
    )
    return _cast(out, GPUS.column_names, polars_schema(GPUS))


def mig_instances_from_devices(devices: pl.DataFrame) -> pl.DataFrame:
    spans = (
        devices.filter((pl.col("gpu_i_id") >= 0) & pl.col("mig_profile").is_not_null())
        .group_by("uuid", "gpu_i_id", pl.col("mig_profile").alias("profile"))
        .agg(pl.col("first_ts").min().alias("start_ts"), pl.col("last_ts").max().alias("end_ts"))
    )
    return _cast(spans, MIG_INSTANCES.column_names, polars_schema(MIG_INSTANCES))


def nodes_from_gpus(gpus: pl.DataFrame, observed_at: datetime) -> pl.DataFrame:
    nodes = gpus.group_by("node").agg(
        pl.col("model").mode().first(),
        pl.col("uuid").n_unique().cast(pl.Int32).alias("gpu_count"),
        pl.when(pl.col("sharing_mode").n_unique() == 1).then(pl.col("sharing_mode").first())
        .otherwise(pl.lit("mixed")).alias("sharing_mode"),
        pl.col("replicas").max(),
    ).with_columns(pl.lit(observed_at).cast(pl.Datetime("us", "UTC")).alias("observed_at"))
    return _cast(nodes, NODES.column_names, polars_schema(NODES))
