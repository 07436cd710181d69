"""dcgm-exporter series → `gpu_samples` rows, and what they reveal about the devices.

Label facts handled here (see DESIGN.md): the node is `Hostname` or `hostname`; MIG series
carry the parent `UUID` plus `GPU_I_ID` and `GPU_I_PROFILE`; time-sliced replicas carry
`vgpu`; the workload is `pod`/`namespace`/`container`, or their `exported_` forms when a
ServiceMonitor with honorLabels false renamed them (then plain `pod` names the exporter's own
pod, so in `auto` mode a node that shows any `exported_` label uses only those). A series with
empty workload labels is an unattributed device: kept, with NULL namespace/pod.

Steps of `build_gpu_samples`:
1. Stack the per-field series; map labels to device keys once per series.
2. Screen samples (clock skew dropped; NaN/negative/out-of-range nulled; all counted).
3. Resolve duplicate series per (device, instant, field): prefer an attributed series, then
   the lowest series id; count the rest.
4. Pivot fields to columns on integer ids; join the series attributes back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from collectors.chunks import Chunk
from collectors.prom_parse import Matrix
from collectors.promql import NODE_LABELS
from collectors.quality import Quality
from collectors.screen import screen
from core.frames import GPU_SAMPLES, WHOLE_GPU, polars_schema

WORKLOAD = ("namespace", "pod", "container")
SERIES_LABELS: tuple[str, ...] = (
    "UUID", "gpu", "modelName", "GPU_I_ID", "GPU_I_PROFILE", *NODE_LABELS, "vgpu",
    *WORKLOAD, *(f"exported_{w}" for w in WORKLOAD),
)
BOUNDS: dict[str, tuple[float, float]] = {
    "gr_engine_active": (0.0, 1.0),
    "sm_active": (0.0, 1.0),
    "tensor_active": (0.0, 1.0),
    "dram_active": (0.0, 1.0),
    "gpu_util": (0.0, 100.0),
    "fb_used_mib": (0.0, 2.0**21),
    "fb_free_mib": (0.0, 2.0**21),
    "power_w": (0.0, 5000.0),
    "gpu_temp_c": (0.0, 200.0),
}
DEVICE_KEY = ("uuid", "gpu_i_id", "vgpu")
ATTRIBUTES = ("node", "mig_profile", "namespace", "pod", "container", "gpu_index", "model_name")


@dataclass(frozen=True)
class GpuBuild:
    samples: pl.DataFrame
    """Rows of `gpu_samples`."""
    devices: pl.DataFrame
    """One row per device series seen: DEVICE_KEY + node, mig_profile, gpu_index, model_name,
    first_ts, last_ts, fb_total_mib (max of used + free)."""


def map_series(series: pl.DataFrame, mode: str) -> pl.DataFrame:
    """Label columns → device keys and attributes (one row per series)."""
    node = pl.coalesce(*(pl.col(n) for n in NODE_LABELS))
    has_exported = pl.any_horizontal(*(pl.col(f"exported_{w}").is_not_null() for w in WORKLOAD))
    if mode == "exported":
        use_exported = pl.lit(True)
    elif mode == "direct":
        use_exported = pl.lit(False)
    else:
        use_exported = has_exported.any().over(node)
    out = series.with_columns(node.alias("node")).with_columns(
        pl.col("UUID").alias("uuid"),
        pl.col("GPU_I_ID").cast(pl.Int32, strict=False).fill_null(WHOLE_GPU).alias("gpu_i_id"),
        pl.col("GPU_I_PROFILE").alias("mig_profile"),
        pl.col("gpu").cast(pl.Int32, strict=False).alias("gpu_index"),
        pl.col("modelName").alias("model_name"),
        *(
            pl.when(use_exported).then(pl.col(f"exported_{w}")).otherwise(pl.col(w)).alias(w)
            for w in WORKLOAD
        ),
    )
    return out.select("sid", "field", "uuid", "gpu_i_id", "vgpu", *ATTRIBUTES)


def stack(matrices: dict[str, Matrix]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Concatenate per-field matrices, renumbering series ids to be unique."""
    series_parts, sample_parts = [], []
    offset = 0
    for field_name, matrix in matrices.items():
        s = matrix.series.select(
            (pl.col("sid") + offset).alias("sid"), pl.lit(field_name).alias("field"),
            *(pl.col(c) if c in matrix.series.columns else pl.lit(None, pl.String).alias(c)
              for c in SERIES_LABELS),
        )
        series_parts.append(s)
        sample_parts.append(matrix.samples.with_columns(
            (pl.col("sid") + offset).alias("sid"), pl.lit(field_name).alias("field")))
        offset += matrix.series.height
    series = pl.concat(series_parts) if series_parts else pl.DataFrame(
        schema={"sid": pl.UInt32, "field": pl.String, **{c: pl.String for c in SERIES_LABELS}})
    samples = pl.concat(sample_parts) if sample_parts else pl.DataFrame(
        schema={"sid": pl.UInt32, "ts": pl.Datetime("us", "UTC"), "value": pl.Float64, "field": pl.String})
    return series, samples


def build_gpu_samples(
    matrices: dict[str, Matrix], chunk: Chunk, now: datetime, mode: str, quality: Quality,
) -> GpuBuild:
    """Per-field range answers (field = `gpu_samples` column) → rows and device facts."""
    table = GPU_SAMPLES.name
    # 1. Series → keys, with integer ids for the device and the attributed series.
    raw_series, raw_samples = stack(matrices)
    series = map_series(raw_series, mode)
    orphans = series.filter(pl.col("uuid").is_null() | pl.col("node").is_null())
    if orphans.height:
        lost = raw_samples.join(orphans.select("sid"), on="sid").group_by("field").agg(pl.len().alias("n"))
        quality.add_frame(table, lost.with_columns(pl.lit("unattributable").alias("reason")))
        series = series.filter(pl.col("uuid").is_not_null() & pl.col("node").is_not_null())
    series = series.with_columns(
        pl.struct(DEVICE_KEY).rank("dense").cast(pl.UInt32).alias("did"),
        pl.struct(DEVICE_KEY, *ATTRIBUTES).rank("dense").cast(pl.UInt32).alias("aid"),
        pl.col("pod").is_null().alias("_unattributed"),
    )
    # 2. Screen samples.
    samples = raw_samples.join(series.select("sid", "did", "aid", "_unattributed"), on="sid")
    samples, bad = screen(samples, chunk, now, BOUNDS)
    quality.add_frame(table, bad)
    # 3. Duplicates: one sample per (device, instant, field).
    samples = samples.sort("did", "ts", "field", "_unattributed", "sid")
    extra = ~samples.select(pl.struct("did", "ts", "field").is_first_distinct()).to_series()
    n_dup = samples.filter(extra).group_by("field").agg(pl.len().alias("n"))
    quality.add_frame(table, n_dup.with_columns(pl.lit("duplicate_series").alias("reason")))
    samples = samples.filter(~extra)
    # 4. Pivot on integers, then attach attributes.
    wide = samples.pivot(on="field", index=["did", "ts"], values="value", aggregate_function="first")
    rows_aid = samples.group_by("did", "ts").agg(pl.col("aid").first())
    wide = wide.join(rows_aid, on=["did", "ts"])
    attrs = series.unique("aid").select("aid", *DEVICE_KEY, *ATTRIBUTES)
    wide = wide.join(attrs, on="aid")
    schema = polars_schema(GPU_SAMPLES)
    out = wide.select(
        *(pl.col(c).cast(schema[c]) if c in wide.columns else pl.lit(None, schema[c]).alias(c)
          for c in GPU_SAMPLES.column_names)
    ).sort("ts", "node", "uuid", "gpu_i_id")
    devices = _devices(wide, chunk)
    return GpuBuild(out, devices)


def _devices(wide: pl.DataFrame, chunk: Chunk) -> pl.DataFrame:
    fb = [c for c in ("fb_used_mib", "fb_free_mib") if c in wide.columns]
    total = pl.sum_horizontal(*fb) if len(fb) == 2 else pl.lit(None, pl.Float64)
    return (
        wide.with_columns(total.alias("_fb_total"))
        .group_by(*DEVICE_KEY)
        .agg(
            pl.col("node").last(), pl.col("mig_profile").last(), pl.col("gpu_index").last(),
            pl.col("model_name").last(),
            pl.col("ts").min().alias("first_ts"),
            (pl.col("ts").max() + chunk.step).alias("last_ts"),
            pl.col("_fb_total").max().alias("fb_total_mib"),
        )
    )
