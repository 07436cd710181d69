"""Inventory seen through the metrics: GPUs, MIG instances and nodes from dcgm-exporter series,
and what the nodes' labels add (`with_node_facts`: time-slicing and MPS, the pool).

This is what a Prometheus-only setup knows about the fleet; the Kubernetes API collector adds
richer node facts when it is reachable (the pipeline merges, so neither erases the other).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from gpuledger.core.frames import GPUS, MIG_INSTANCES, NODES, polars_schema
from gpuledger.core.gfd import replicated
from gpuledger.core.labels import UNKNOWN, pool_of
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
        .fill_null(UNKNOWN).alias("model"),
        pl.when(pl.col("_mig")).then(pl.lit("mig"))
        .when(pl.col("_replicas") > 0).then(pl.lit("timeslice"))
        .otherwise(pl.lit("exclusive")).alias("sharing_mode"),
        pl.when(pl.col("_replicas") > 0).then(pl.col("_replicas")).otherwise(None).alias("replicas"),
    )
    return _cast(out, GPUS.column_names, polars_schema(GPUS))


def with_node_facts(gpus: pl.DataFrame, labels: dict[str, dict[str, str]]) -> pl.DataFrame:
    """`gpus` (from `gpus_from_devices`) with what its node's labels say, per node (`labels`,
    kube-state-metrics' `kube_node_labels` as `ksm.node_labels_from_vector` restores them):

    - a whole card on a node GPU feature discovery labels as replicated (time-slicing or MPS,
      `core.gfd`) is `timeslice`, with the configured replicas: by default dcgm-exporter shows
      such a card as one series with ONE of its pods and no `vgpu` label, so the series alone
      call it exclusive (and the count of `vgpu` values seen is only a lower bound);
    - a card without a pool takes its node's (`core.labels.pool_of`).

    The bill applies the same rule to the node labels stored in `nodes` whichever collector
    wrote them (`analytics.devices.replicas.cards`); this makes the stored inventory say it too."""
    if gpus.height == 0 or not labels:
        return gpus
    rows = []
    for node, found in labels.items():
        shared = replicated(found)
        rows.append((node, pool_of(found), shared is not None, shared.replicas if shared else None))
    facts = pl.DataFrame(rows, orient="row", schema={
        "node": pl.String, "_pool": pl.String, "_replicated": pl.Boolean, "_configured": pl.Int32})
    whole = (pl.col("sharing_mode") == "exclusive") & pl.col("_replicated").fill_null(False)
    shared_card = (pl.col("sharing_mode") == "timeslice") | whole
    out = gpus.join(facts, on="node", how="left", maintain_order="left").with_columns(
        pl.when(whole).then(pl.lit("timeslice")).otherwise(pl.col("sharing_mode")).alias("sharing_mode"),
        pl.when(shared_card).then(pl.coalesce("_configured", "replicas")).otherwise(pl.col("replicas"))
        .alias("replicas"),
        pl.coalesce("pool", "_pool").alias("pool"),
    )
    return _cast(out, GPUS.column_names, polars_schema(GPUS))


def mig_instances_from_devices(devices: pl.DataFrame) -> pl.DataFrame:
    spans = (
        devices.filter((pl.col("gpu_i_id") >= 0) & pl.col("mig_profile").is_not_null())
        .group_by("uuid", "gpu_i_id", pl.col("mig_profile").alias("profile"))
        .agg(pl.col("first_ts").min().alias("start_ts"), pl.col("last_ts").max().alias("end_ts"))
    )
    return _cast(spans, MIG_INSTANCES.column_names, polars_schema(MIG_INSTANCES))


def nodes_from_gpus(gpus: pl.DataFrame, observed_at: datetime,
                    valid_from: datetime | None = None) -> pl.DataFrame:
    """NODES rows of the nodes with cards in `gpus`, seen at `observed_at`; `valid_from`: since
    when what they say held (a Prometheus chunk's start: its labels are the chunk's, decision
    0207), NULL where only the moment of reading is known."""
    nodes = gpus.group_by("node").agg(
        pl.col("model").mode().first(),
        pl.col("uuid").n_unique().cast(pl.Int32).alias("gpu_count"),
        pl.when(pl.col("sharing_mode").n_unique() == 1).then(pl.col("sharing_mode").first())
        .otherwise(pl.lit("mixed")).alias("sharing_mode"),
        pl.col("replicas").max(),
    ).with_columns(pl.lit(observed_at).cast(pl.Datetime("us", "UTC")).alias("observed_at"),
                   pl.lit(valid_from).cast(pl.Datetime("us", "UTC")).alias("valid_from"))
    return _cast(nodes, NODES.column_names, polars_schema(NODES))
