"""Card-hours and idle computed from the *samples* alone, the way an analyst would, without
any simulator code: shares from the MIG profile name, the time-slice replica count and, on a
HAMi card (whose samples name no pod), HAMi's allocations: each allocation's span of the card's
samples, at the larger of its cores / 100 and MiB / card MiB; idle from runs of low
GR_ENGINE_ACTIVE per device and pod."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from gpuledger.core.mig import COMPUTE_SLICES, parse_profile_name


def shares(samples: pl.DataFrame, gpus: pl.DataFrame, allocations: pl.DataFrame) -> pl.DataFrame:
    """Held sample rows with the share of the card each stands for."""
    hami = allocations.select(
        "uuid", pl.col("namespace").alias("_ns"), pl.col("pod").alias("_pod"), "start_ts", "end_ts",
        pl.max_horizontal(pl.col("cores_pct") / 100, pl.col("mem_mib") / pl.col("card_mem_mib")).alias("_alloc"),
    )
    on_hami = samples.filter(pl.col("pod").is_null()).join(hami, on="uuid").filter(
        (pl.col("ts") >= pl.col("start_ts")) & (pl.col("ts") < pl.col("end_ts"))
    ).with_columns(pl.col("_ns").alias("namespace"), pl.col("_pod").alias("pod"), pl.lit("hami").alias("vgpu"))
    cores = dict(zip(zip(on_hami["namespace"], on_hami["pod"], strict=True), on_hami["_alloc"], strict=True))
    held = pl.concat([samples.filter(pl.col("pod").is_not_null()), on_hami.select(samples.columns)]).join(
        gpus.select("uuid", "sharing_mode", "replicas"), on="uuid", how="left"
    )

    def share(row: dict) -> float:
        mode = row["sharing_mode"]
        if mode == "mig":
            return parse_profile_name(row["mig_profile"])[0] / COMPUTE_SLICES
        if mode == "timeslice":
            return 1 / row["replicas"]
        if mode == "vgpu":
            return cores[(row["namespace"], row["pod"])]
        return 1.0

    return held.with_columns(
        pl.struct("sharing_mode", "mig_profile", "replicas", "namespace", "pod")
        .map_elements(share, return_dtype=pl.Float64).alias("share")
    )


def card_hours(held: pl.DataFrame, step: timedelta) -> float:
    return float(held["share"].sum()) * step.total_seconds() / 3600


def idle_card_hours(held: pl.DataFrame, step: timedelta, threshold: float = 0.05, min_minutes: int = 30) -> float:
    """Steps inside runs of >= min_minutes consecutive below-threshold samples of one
    (device, pod), times the share."""
    need = int(min_minutes * 60 / step.total_seconds())
    keys = ["uuid", "gpu_i_id", "vgpu", "pod"]
    df = held.sort([*keys, "ts"]).with_columns(
        (pl.col("gr_engine_active") < threshold).alias("low"),
    )
    df = df.with_columns(
        (
            (pl.col("ts").diff().over(keys) != step).fill_null(True)
            | (pl.col("low") != pl.col("low").shift(1).over(keys)).fill_null(True)
        ).cum_sum().alias("run")
    )
    runs = df.group_by([*keys, "run"]).agg(pl.len().alias("n"), pl.first("low"), pl.first("share"))
    idle = runs.filter(pl.col("low") & (pl.col("n") >= need))
    return float((idle["n"] * idle["share"]).sum()) * step.total_seconds() / 3600
