"""Requested vs used, per workload: what each allocation held and how much of it it used.

A workload here is an allocation: one pod on one device (a whole card, a MIG instance, a
time-slice replica or a vGPU share). From raw samples (pushed into DuckDB): mean, p95 and
spread of activity (GR_ENGINE_ACTIVE, else GPU_UTIL/100), p95 and peak framebuffer use. From
the bill: card-hours, idle card-hours and cost. From the inventory: the card model, the
device's memory, the pod's owner and requests.

On time-sliced and vGPU cards DCGM reports the whole card's activity and memory on every
replica, so those figures describe the card, not the pod (`card_level_metrics`).
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.bill import Bill, compute_bill
from gpuledger.analytics.shares import profile_slices
from gpuledger.core.activity import ACTIVITY_SQL
from gpuledger.core.config import Settings
from gpuledger.core.mig import MEMORY_SLICES, catalog
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

_STATS_SQL = f"""
SELECT namespace, pod, uuid, gpu_i_id, nullif(coalesce(vgpu, ''), '') AS vgpu, mig_profile AS profile,
    count(*) AS samples,
    avg({ACTIVITY_SQL}) AS act_mean,
    quantile_cont({ACTIVITY_SQL}, 0.95) AS act_p95,
    stddev_pop({ACTIVITY_SQL}) AS act_std,
    quantile_cont(fb_used_mib, 0.95) AS fb_p95_mib,
    max(fb_used_mib) AS fb_max_mib
FROM gpu_samples
WHERE ts >= $start AND ts < $end AND namespace IS NOT NULL
GROUP BY namespace, pod, uuid, gpu_i_id, coalesce(vgpu, ''), mig_profile
"""

KEYS = ("namespace", "pod", "uuid", "gpu_i_id", "vgpu", "profile")


def device_memory_mib(model: str, profile: str | None, card_memory: float | None) -> float | None:
    """Framebuffer of the device a workload holds: the card, or its MIG instance's share."""
    if profile is None:
        return card_memory
    known = catalog().get(model)
    if known is not None and profile in known.profiles:
        p = known.profiles[profile]
        if p.memory_mib:
            return float(p.memory_mib)
        total = known.memory_mib or card_memory
        return float(total) * p.memory / MEMORY_SLICES if total else None
    _, memory = profile_slices(model, profile)
    return float(card_memory) * memory / MEMORY_SLICES if memory and card_memory else None


def workload_usage(
    wh: Warehouse, window: Window, settings: Settings, bill: Bill | None = None
) -> pl.DataFrame:
    """One row per allocation: requested (device, share, requests) vs used (activity, memory)."""
    stats = wh.query(_STATS_SQL, {"start": window.start, "end": window.end})
    bill = bill or compute_bill(wh, window, settings, ("team",))
    held = idle_allocations_all(bill)
    gpus = wh.query(
        "SELECT uuid, model, memory_mib AS card_memory_mib, sharing_mode AS card_mode FROM gpus"
    )
    pods = wh.query(
        "SELECT namespace, pod, owner_kind, owner_name, CAST(gpu_requests AS VARCHAR) AS requests, "
        "CAST(labels AS VARCHAR) AS labels FROM pods"
    )
    frame = (
        stats.join(held, on=list(KEYS), how="inner", nulls_equal=True)
        .join(gpus, on="uuid", how="left")
        .join(pods, on=["namespace", "pod"], how="left")
    )
    memory = [
        device_memory_mib(m, p, c)
        for m, p, c in frame.select("model", "profile", "card_memory_mib").iter_rows()
    ]
    return frame.with_columns(
        pl.Series("device_memory_mib", memory, dtype=pl.Float64),
        (pl.col("idle_card_hours") / pl.col("card_hours")).fill_nan(0.0).alias("idle_fraction"),
        (pl.col("card_hours") / pl.col("share")).alias("held_hours"),
        pl.col("sharing_mode").is_in(["timeslice", "vgpu"]).alias("card_level_metrics"),
    ).with_columns(
        (pl.col("fb_p95_mib") / pl.col("device_memory_mib")).alias("fb_p95_ratio"),
    ).sort(["namespace", "pod", "uuid", "gpu_i_id"], nulls_last=True)


def idle_allocations_all(bill: Bill) -> pl.DataFrame:
    """The bill per allocation (card-hours, idle, cost), idle or not, with its mean share."""
    held = bill.detail.filter(pl.col("kind") == "allocated")
    return held.group_by(["team", *KEYS, "sharing_mode", "queue"]).agg(
        pl.col("card_hours").sum(),
        pl.col("idle_card_hours").sum(),
        pl.col("held_idle_card_hours").sum(),
        pl.col("cost").sum(),
        pl.col("idle_cost").sum(),
        (pl.col("card_hours").sum() / pl.col("held_hours").sum()).alias("share"),
        pl.col("unit_price").mean(),
        pl.col("discount_factor").mean(),
    )

