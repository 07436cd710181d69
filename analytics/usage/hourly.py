"""Card-hours per device, holder and hour: the frame of table `card_hours_hourly`.

The bill is computed from this frame, whether it comes straight from raw samples (this module)
or from the stored roll-up (the warehouse keeps it after raw samples age out), so both paths
price exactly the same numbers.

All of it under one typed rule set (`core.rules.Rules`): the sampling rules decide held, active
and idle time, the share rules what part of a card a holder pays (docs/decisions/0147).

1. Held time per device, holder and hour from the raw samples (`analytics.sampling`).
2. Attach the card (model, pool, sharing mode, replicas, memory: its node's configuration in force
   in the row's hour, `analytics.devices.replicas.at_hour`) and the pod (queue, requests);
   shared cards exported without `vgpu` labels get their holders from the pods
   (`analytics.devices.unlabeled`).
3. Give each row its share of the card (its sharing mode's source in `analytics.devices`)
   and clamp a card's hour to one.
4. card_hours = held_hours x share; idle and held-idle card-hours the same way.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from gpuledger.analytics.devices.base import ShareInputs
from gpuledger.analytics.devices.dra_rows import with_claim_rows
from gpuledger.analytics.devices.registry import sharing_mode_expr, with_shares
from gpuledger.analytics.devices.replicas import at_hour, cards, node_configs
from gpuledger.analytics.devices.shares import clamp_to_card, vgpu_request
from gpuledger.analytics.devices.unlabeled import split_unlabeled
from gpuledger.analytics.sampling.results import held_hourly
from gpuledger.core.errors import InputError
from gpuledger.core.frames import CARD_HOURS_HOURLY, polars_schema
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.usage import pods_between

HOURLY_COLUMNS: tuple[str, ...] = CARD_HOURS_HOURLY.column_names


def pod_inventory(wh: Warehouse, window: Window) -> pl.DataFrame:
    """Pods alive around the window with their queue and declared vGPU fractions."""
    pods = pods_between(wh, window.start - timedelta(days=1), window.end + timedelta(days=1))
    # Parsed once per distinct request (a fleet's pods repeat a handful of them): parsing every
    # pod's JSON in Python was a sixth of a 1,000-GPU day's roll-up.
    distinct = pods.select(pl.col("gpu_requests").unique())["gpu_requests"].to_list()
    parsed = [vgpu_request(r) for r in distinct]
    requests = pl.DataFrame({
        "gpu_requests": pl.Series(distinct, dtype=pl.String),
        "req_cores": pl.Series([p[0] for p in parsed], dtype=pl.Float64),
        "req_mem_mib": pl.Series([p[1] for p in parsed], dtype=pl.Float64),
        "req_mem_pct": pl.Series([p[2] for p in parsed], dtype=pl.Float64),
    })
    return pods.join(requests, on="gpu_requests", how="left", nulls_equal=True,
                     maintain_order="left").drop("gpu_requests")


def attach_pods(frame: pl.DataFrame, pods: pl.DataFrame) -> pl.DataFrame:
    """Each held row (`ts`: its hour) with the facts of the pod incarnation it belongs to.

    A pod name is not a pod: a StatefulSet recreates its pod under the same name (a new uid and
    `status.startTime`), so the pods table holds one row per incarnation (its key is
    namespace, pod, start_ts). A plain join on (namespace, pod) gave every held row of a
    restarted StatefulSet pod once per incarnation: its card-hours and idle counted twice, and
    on a shared card the clamp then took the excess from the card's other holders (issue 29).
    The row gets the newest incarnation started before its hour ends (in the hour of a restart
    the new one's requests stand for both; they are the same spec unless it was edited), and
    the first incarnation where none had started yet (a sample ahead of the pod's start)."""
    if pods.is_empty():
        return frame.join(pods.drop("start_ts"), on=["namespace", "pod"], how="left")
    keys = ["namespace", "pod"]
    pods = pods.with_columns(pl.col("start_ts").cast(pl.Datetime("us", "UTC"))).sort("start_ts")
    facts = [c for c in pods.columns if c not in (*keys, "start_ts")]
    rows = frame.with_row_index("_row").with_columns(
        (pl.col("ts") + timedelta(hours=1)).alias("_hour_end")).sort("_hour_end")
    newest = rows.join_asof(pods, left_on="_hour_end", right_on="start_ts", by=keys, strategy="backward",
                            allow_exact_matches=False, check_sortedness=False)
    first = pods.unique(keys, keep="first", maintain_order=True).drop("start_ts")
    early = newest.filter(pl.col("start_ts").is_null()).drop(*facts, "start_ts")
    later = early.join(first, on=keys, how="left")
    found = pl.concat([newest.filter(pl.col("start_ts").is_not_null()).drop("start_ts"),
                       later.select(newest.drop("start_ts").columns)])
    return found.sort("_row").drop("_row", "_hour_end")


def hourly_usage(
    wh: Warehouse, window: Window, rules: Rules, held: pl.DataFrame | None = None, *,
    gpus: pl.DataFrame | None = None, configs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The `card_hours_hourly` frame for `window` under `rules`, from raw samples (numbered
    steps above); `rules` (its rollup fingerprint) is the frame's `rules` column.

    `held`: step 1's frame when the caller already has it (the roll-up computes it in the same
    pass as the allocations, `analytics.usage.rollup`); `gpus`: `analytics.devices.replicas.cards`
    when the caller already read it (the bill prices with the same frame: read and parsed once);
    `configs`: `analytics.devices.replicas.node_configs` of `window` or of a window around it
    (the bill's), likewise (read here once otherwise, for `cards` and `at_hour`)."""
    # 1. Held time: the samples', and on DRA cards the claims' (`analytics.devices.dra_rows`).
    configs = node_configs(wh, window) if configs is None else configs
    gpus = cards(wh, window, configs=configs) if gpus is None else gpus  # replicated node: `timeslice`
    sampled = held if held is not None else held_hourly(wh, window, rules.sampling)
    held = split_unlabeled(wh, sampled, gpus, window)
    held = with_claim_rows(wh, window, held)
    if held.is_empty():
        return pl.DataFrame(schema=polars_schema(CARD_HOURS_HOURLY))
    # 2. Card and pod facts (holders of shared cards without `vgpu` labels from the pods).
    frame = held.join(gpus, on="uuid", how="left")
    missing = frame.filter(pl.col("model").is_null())["uuid"].unique().sort().to_list()
    if missing:
        raise InputError(
            f"gpu_samples: GPU {missing[0]} (and {len(missing) - 1} more) has samples but no row "
            "in table gpus; collect the inventory before billing"
        )
    frame = at_hour(frame, wh, window, configs=configs)  # mode, pool, replicas: the labels that hour
    frame = attach_pods(frame, pod_inventory(wh, window))
    frame = frame.with_columns(sharing_mode_expr())
    # 3. Shares, each row by its sharing mode's device source.
    frame = with_shares(frame, ShareInputs(wh=wh, gpus=gpus, window=window, shares=rules.shares))
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
        pl.lit(rules.rollup_fingerprint).alias("rules"),
    )
    schema = polars_schema(CARD_HOURS_HOURLY)
    return frame.select([pl.col(c).cast(schema[c]) for c in HOURLY_COLUMNS]).sort(
        ["ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"], nulls_last=True
    )
