"""Card-hours and idle computed from the *samples* alone, the way an analyst would, without
any simulator code: shares from the MIG profile name, the time-slice replica count and the
HAMi gpucores request; idle from runs of low GR_ENGINE_ACTIVE per device and pod."""

from __future__ import annotations

import json
from datetime import timedelta

import polars as pl

from gpuledger.core.mig import COMPUTE_SLICES, parse_profile_name


def shares(samples: pl.DataFrame, gpus: pl.DataFrame, pods: pl.DataFrame) -> pl.DataFrame:
    """Held sample rows with the share of the card each stands for."""
    cores = {
        (ns, pod): json.loads(req).get("nvidia.com/gpucores")
        for ns, pod, req in pods.select("namespace", "pod", "gpu_requests").iter_rows()
    }
    held = samples.filter(pl.col("pod").is_not_null()).join(
        gpus.select("uuid", "sharing_mode", "replicas"), on="uuid", how="left"
    )

    def share(row: dict) -> float:
        mode = row["sharing_mode"]
        if mode == "mig":
            return parse_profile_name(row["mig_profile"])[0] / COMPUTE_SLICES
        if mode == "timeslice":
            return 1 / row["replicas"]
        if mode == "vgpu":
            return cores[(row["namespace"], row["pod"])] / 100
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
