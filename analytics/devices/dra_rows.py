"""Held rows from DRA claims: a claim holds its devices from allocation to release, telemetry or not.

Why the claims and not the samples: a dynamically created MIG device may have no dcgm series at
all, and a claim allocated while its pod is not running has none either, yet both hold capacity
nobody else can use. So on the cards a claim holds, the claim is the holder and the telemetry
only says how much of that time was idle.

1. Each allocated device of each claim (`dra_claims` joined to `dra_devices`: parent card,
   profile, placement; for a claim rebuilt from Prometheus history, its held spans,
   `dra_history`) over its span, cut at the hours of the window and at the moments the pods
   reserving it (`dra_reservations`, or where the API's reservations were not collected, the
   pods kube-state-metrics saw referencing it: `dra_pod_claims`) come and go.
2. In each piece the claim's time is split evenly among the pods reserving it (a shared claim);
   a piece no pod reserves is held by the claim's namespace with no pod. Each row's
   `held_hours` is its pod's portion of the wall time.
3. Telemetry: the sample rows of that hour on the claim's card and profile whose holder is the
   claim's namespace and one of its pods (or no pod: a series attributed by
   `dra_claim_namespace` alone) give the idle, held-idle and activity of the claim's
   hour, divided among the claim's rows by their portion. A claim-hour without any sample is
   "activity unknown" (never idle, never busy). Those sample rows leave the held frame: the claim
   rows replace them, so nothing is billed twice.

Rows are keyed on (parent UUID, placement, claim UID): `uuid` = the parent card, `gpu_i_id` =
the MIG placement (memory-slice start; -1 for a whole GPU), `vgpu` = the claim UID. A dynamic
MIG device's own UUID changes each time it is created, so it is never the key.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any

import polars as pl

from gpuledger.analytics.devices.dra_history import claimed_devices
from gpuledger.core.window import HOUR, Window, as_utc, floor_time
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import devices as device_queries
from gpuledger.warehouse.queries import dra as queries

DRA_MARK = "dra_share_basis"
"""Column set on claim rows only (the device kind: `gpu` or `mig`); NULL on sample rows."""


def _pieces(start: datetime, end: datetime, cuts: list[datetime]) -> list[tuple[datetime, datetime]]:
    """[start, end) cut at every hour and at `cuts` inside it."""
    points = {start, end, *(c for c in cuts if start < c < end)}
    hour = floor_time(start, HOUR) + HOUR
    while hour < end:
        points.add(hour)
        hour += HOUR
    ordered = sorted(points)
    return list(pairwise(ordered))


def _claim_rows(claim: dict[str, Any], pods: list[tuple[str, datetime, datetime]],
                window: Window) -> list[dict[str, Any]]:
    """Steps 1-2 for one allocated device of one claim."""
    start = max(as_utc(claim["start_ts"]), window.start)
    end = min(as_utc(claim["end_ts"]), window.end)
    cuts = [t for _, s, e in pods for t in (s, e)]
    portions: dict[tuple[datetime, str | None], float] = defaultdict(float)
    for lo, hi in _pieces(start, end, cuts):
        holders: list[str | None] = [p for p, s, e in pods if s <= lo and e >= hi]
        hours = (hi - lo) / HOUR
        for pod in holders or [None]:
            portions[(floor_time(lo, HOUR), pod)] += hours / max(len(holders), 1)
    return [
        {"ts": ts, "uuid": claim["uuid"], "gpu_i_id": claim["placement"], "vgpu": claim["claim_uid"],
         "profile": claim["profile"], "namespace": claim["namespace"], "pod": pod,
         "held_hours": hours, DRA_MARK: claim["kind"], "dra_claim": claim["claim"],
         "dra_device_class": claim["device_class"], "dra_sharing": claim["sharing"],
         "dra_source": claim["source"]}
        for (ts, pod), hours in portions.items() if hours > 0
    ]


def claim_rows(wh: Warehouse, window: Window) -> pl.DataFrame:
    """Steps 1-2 for every claim holding a device in `window`: the API's, and those rebuilt
    from Prometheus history (`dra_history`)."""
    claims, reservations = claimed_devices(wh, window)
    by_claim: dict[str, list[tuple[str, datetime, datetime]]] = defaultdict(list)
    for uid, pod, s, e in reservations.iter_rows():
        by_claim[uid].append((pod, as_utc(s), as_utc(e)))
    rows = [r for c in claims.iter_rows(named=True) for r in _claim_rows(c, by_claim[c["claim_uid"]], window)]
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "ts": pl.Datetime("us", "UTC"), "uuid": pl.String, "gpu_i_id": pl.Int32, "vgpu": pl.String,
        "profile": pl.String, "namespace": pl.String, "pod": pl.String, "held_hours": pl.Float64,
        DRA_MARK: pl.String, "dra_claim": pl.String, "dra_device_class": pl.String,
        "dra_sharing": pl.String, "dra_source": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def _telemetry(held: pl.DataFrame, claims: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step 3: per claim and hour the matched samples' idle, activity and memory, and the sample
    rows that matched (to drop)."""
    holders = (claims.filter(pl.col("pod").is_not_null()).select("vgpu", "namespace", "pod").unique()
               .with_columns(pl.lit(True).alias("_ok")))
    pods_of = holders.group_by("vgpu").agg(pl.len().alias("_n"))
    no_profile = pl.col("profile").fill_null("").alias("_p")
    keys = claims.select("ts", "uuid", no_profile, "namespace", "vgpu").unique()
    samples = held.drop("vgpu").with_columns(no_profile).with_row_index("_row")
    matched = (
        samples.join(keys, on=["ts", "uuid", "_p", "namespace"], how="inner")
        .join(holders, on=["vgpu", "namespace", "pod"], how="left")
        .join(pods_of, on="vgpu", how="left")
        .filter(pl.col("_n").is_null() | pl.col("_ok").fill_null(False) | pl.col("pod").is_null())
    )
    per_hour = matched.group_by("ts", "vgpu").agg(
        pl.col("held_hours").sum().alias("_t_held"),
        pl.col("idle_hours").sum().alias("_t_idle"),
        pl.col("held_idle_hours").sum().alias("_t_held_idle"),
        ((pl.col("held_hours") * pl.col("active_ratio")).sum()
         / pl.when(pl.col("active_ratio").is_not_null()).then(pl.col("held_hours")).sum()).alias("_t_active"),
        pl.col("fb_used_max_mib").max().alias("_t_fb"),
    )
    return per_hour, matched.select("_row").unique()


def with_claim_rows(wh: Warehouse, window: Window, held: pl.DataFrame) -> pl.DataFrame:
    """`held` with the claim rows added and the samples they explain removed (steps 1-3).

    Always adds the claim columns (NULL on sample rows) so the DRA device source can match."""
    claims = claim_rows(wh, window)
    extra = [c for c in claims.columns if c not in held.columns]
    if claims.is_empty():
        return held.with_columns(*(pl.lit(None, dtype=claims.schema[c]).alias(c) for c in extra))
    per_hour, rows = _telemetry(held, claims)
    claim_hours = claims.group_by("ts", "vgpu").agg(pl.col("held_hours").sum().alias("_c_held"))
    portion = pl.col("held_hours") / pl.col("_c_held")
    idle = (pl.col("_t_idle") * portion).fill_null(0.0)
    claims = (
        claims.join(claim_hours, on=["ts", "vgpu"], how="left")
        .join(per_hour, on=["ts", "vgpu"], how="left")
        .with_columns(
            pl.min_horizontal(idle, pl.col("held_hours")).alias("idle_hours"),
            pl.min_horizontal((pl.col("_t_held_idle") * portion).fill_null(0.0), pl.col("held_hours"))
            .alias("held_idle_hours"),
            pl.col("_t_active").alias("active_ratio"),
            pl.col("_t_fb").alias("fb_used_max_mib"),
            pl.lit(1.0).alias("replica_count"),
        )
    )
    claims = claims.join(device_queries.card_nodes(wh), on="uuid", how="left")
    kept = held.with_row_index("_row").join(rows, on="_row", how="anti").drop("_row")
    kept = kept.with_columns(*(pl.lit(None, dtype=claims.schema[c]).alias(c) for c in extra))
    return pl.concat([kept, claims.select(kept.columns)], how="vertical_relaxed")


def claim_minutes(wh: Warehouse, window: Window) -> float:
    """Total claim-device hours held in `window` (a check figure for tests and reports)."""
    frame = claim_rows(wh, window)
    return float(frame["held_hours"].sum()) if frame.height else 0.0




def with_claim_names(wh: Warehouse, usage: pl.DataFrame) -> pl.DataFrame:
    """`usage` with `claim` (namespace/name) and `device_class` on the DRA rows (NULL elsewhere):
    the bill's `--by claim,device_class`. A claim row's `vgpu` is its claim UID (a claim rebuilt
    from Prometheus history: `prometheus:<namespace>/<name>`, which says its source)."""
    names = queries.claim_names(wh).with_columns(pl.lit("dra").alias("sharing_mode"))
    return usage.join(names, on=["vgpu", "sharing_mode"], how="left")


def with_claim_key(dims: Sequence[str]) -> tuple[str, ...]:
    """`dims` plus the usage key `--by claim|device_class` needs: the claim's UID (`vgpu` of a
    claim row), so the roll-up's coarse grain names claims as the device grain does."""
    return (*dims, "vgpu") if {"claim", "device_class"} & set(dims) else tuple(dims)
