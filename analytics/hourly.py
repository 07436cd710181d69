"""Card-hours per device, holder and hour: the frame of table `card_hours_hourly`.

The bill is computed from this frame, whether it comes straight from raw samples (this module)
or from the stored roll-up (the warehouse keeps it after raw samples age out), so both paths
price exactly the same numbers.

1. Held time per device, holder and hour from the raw samples (`analytics.samples`).
2. Attach the card (model, pool, sharing mode, replicas, memory) and the pod (queue, requests);
   shared cards exported without `vgpu` labels get their holders from the pods
   (`analytics.unlabeled`).
3. Give each row its share of the card (`analytics.shares`) and clamp a card's hour to one.
4. card_hours = held_hours x share; idle and held-idle card-hours the same way.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from gpuledger.analytics.samples import SampleRules, held_hourly
from gpuledger.analytics.shares import (
    clamp_to_card,
    layout_factors,
    mig_share_table,
    raw_mig_share,
    vgpu_request,
    vgpu_share_expr,
)
from gpuledger.analytics.unlabeled import split_unlabeled
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.frames import CARD_HOURS_HOURLY, polars_schema
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

HOURLY_COLUMNS: tuple[str, ...] = CARD_HOURS_HOURLY.column_names


def gpu_inventory(wh: Warehouse) -> pl.DataFrame:
    return wh.query(
        "SELECT uuid, node AS gpu_node, model, pool, sharing_mode AS card_mode, replicas, "
        "memory_mib, first_seen, last_seen FROM gpus"
    )


def pod_inventory(wh: Warehouse, window: Window) -> pl.DataFrame:
    """Pods alive around the window with their queue and declared vGPU fractions."""
    pods = wh.query(
        "SELECT namespace, pod, queue, gpu_requests FROM pods WHERE end_ts >= ? AND start_ts < ?",
        [window.start - timedelta(days=1), window.end + timedelta(days=1)],
    )
    parsed = [vgpu_request(r) for r in pods["gpu_requests"].to_list()]
    return pods.drop("gpu_requests").with_columns(
        pl.Series("req_cores", [p[0] for p in parsed], dtype=pl.Float64),
        pl.Series("req_mem_mib", [p[1] for p in parsed], dtype=pl.Float64),
        pl.Series("req_mem_pct", [p[2] for p in parsed], dtype=pl.Float64),
    )


def _mig_factors(wh: Warehouse, gpus: pl.DataFrame, window: Window) -> pl.DataFrame:
    """Per instance the `max_normalized` divisor: from `mig_instances`, else from the hour."""
    instances = wh.query(
        "SELECT uuid, gpu_i_id, profile, start_ts, end_ts FROM mig_instances "
        "WHERE end_ts > ? AND start_ts < ?",
        [window.start, window.end],
    )
    models = dict(zip(gpus["uuid"].to_list(), gpus["model"].to_list(), strict=True))
    return layout_factors(instances, models)


def hourly_usage(wh: Warehouse, window: Window, settings: Settings) -> pl.DataFrame:
    """The `card_hours_hourly` frame for `window`, from raw samples (numbered steps above)."""
    rules = SampleRules.of(settings)
    # 1. Held time.
    held = held_hourly(wh, window, rules)
    if held.is_empty():
        return pl.DataFrame(schema=polars_schema(CARD_HOURS_HOURLY))
    # 2. Card and pod facts (holders of shared cards without `vgpu` labels from the pods).
    gpus = gpu_inventory(wh)
    held = split_unlabeled(wh, held, gpus, window)
    frame = held.join(gpus, on="uuid", how="left")
    missing = frame.filter(pl.col("model").is_null())["uuid"].unique().sort().to_list()
    if missing:
        raise InputError(
            f"gpu_samples: GPU {missing[0]} (and {len(missing) - 1} more) has samples but no row "
            "in table gpus; collect the inventory before billing"
        )
    frame = frame.join(pod_inventory(wh, window), on=["namespace", "pod"], how="left")
    frame = frame.with_columns(
        pl.when(pl.col("gpu_i_id") >= 0).then(pl.lit("mig"))
        .when(pl.col("card_mode").is_in(["timeslice", "vgpu"])).then(pl.col("card_mode"))
        .otherwise(pl.lit("exclusive"))
        .alias("sharing_mode")
    )
    # 3. Shares.
    frame = _with_shares(wh, frame, gpus, window, settings)
    hour_len = (
        pl.min_horizontal(pl.col("ts") + timedelta(hours=1), pl.lit(window.end))
        - pl.max_horizontal(pl.col("ts"), pl.lit(window.start))
    ).dt.total_microseconds() / 3.6e9
    frame = clamp_to_card(frame, hour_len)
    # 4. Card-hours.
    frame = frame.with_columns(
        (pl.col("held_hours") * pl.col("share")).alias("card_hours"),
        (pl.col("idle_hours") * pl.col("share")).alias("idle_card_hours"),
        (pl.col("held_idle_hours") * pl.col("share")).alias("held_idle_card_hours"),
    )
    schema = polars_schema(CARD_HOURS_HOURLY)
    return frame.select([pl.col(c).cast(schema[c]) for c in HOURLY_COLUMNS]).sort(
        ["ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"], nulls_last=True
    )


def _with_shares(
    wh: Warehouse, frame: pl.DataFrame, gpus: pl.DataFrame, window: Window, settings: Settings
) -> pl.DataFrame:
    basis = settings.sharing.mig_share_basis
    mig_rows = frame.filter(pl.col("sharing_mode") == "mig")
    pairs = list(
        mig_rows.select("model", pl.col("profile").fill_null("")).unique().iter_rows()
    )
    unknown = [(m, p) for m, p in pairs if not p]
    if unknown:
        raise InputError(
            f"gpu_samples: a MIG instance on a {unknown[0][0]} card has no GPU_I_PROFILE label"
        )
    frame = frame.join(mig_share_table(pairs, basis), on=["model", "profile"], how="left")
    if basis == "max_normalized" and mig_rows.height:
        factors = _mig_factors(wh, gpus, window)
        frame = frame.join(factors, on=["uuid", "gpu_i_id", "profile"], how="left")
        # No recorded layout: normalize by the instances seen on the card in the hour.
        seen = (
            mig_rows.select("uuid", "ts", "gpu_i_id", "profile", "model").unique()
            .with_columns(
                pl.struct("model", "profile").map_elements(
                    lambda r: raw_mig_share(r["model"], r["profile"], basis), return_dtype=pl.Float64
                ).alias("_raw")
            )
            .group_by("uuid", "ts").agg(pl.col("_raw").sum().clip(lower_bound=1.0).alias("_hour_factor"))
        )
        frame = frame.join(seen, on=["uuid", "ts"], how="left").with_columns(
            (pl.col("mig_share") / pl.coalesce("factor", "_hour_factor", pl.lit(1.0))).alias("mig_share")
        )
    # Replica count: from the inventory, else the replicas seen on the card.
    seen_replicas = frame.group_by("uuid").agg(pl.col("vgpu").n_unique().alias("_seen_replicas"))
    frame = frame.join(seen_replicas, on="uuid", how="left")
    replicas = pl.coalesce(pl.col("replicas").cast(pl.Float64), pl.col("_seen_replicas").cast(pl.Float64))
    return frame.with_columns(
        pl.when(pl.col("sharing_mode") == "mig").then(pl.col("mig_share"))
        .when(pl.col("sharing_mode") == "timeslice").then(
            pl.col("replica_count") / replicas.clip(lower_bound=1.0)
        )
        .when(pl.col("sharing_mode") == "vgpu").then(
            pl.coalesce(vgpu_share_expr(), 1.0 / replicas.clip(lower_bound=1.0)) * pl.col("replica_count")
        )
        .otherwise(pl.lit(1.0))
        .alias("share")
    )
