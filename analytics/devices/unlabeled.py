"""Shared cards exported without the `vgpu` label: holders from the pods' requests.

Without `--kubernetes-virtual-gpus`, dcgm-exporter shows one series per time-sliced card,
labeled with one of the pods sharing it; the other pods are invisible in the samples. (A HAMi
card is not spread here: HAMi publishes which card each pod got, `analytics.sampling.holders`;
its source does not take holders from the pods, `VirtualGpu.holders_from_pods`.)
For such cards (every held sample of the card in the window lacks `vgpu`), the holders come
from the Kubernetes inventory instead:

1. The pods scheduled on the card's node that request `nvidia.com/gpu` (r replicas) while alive.
2. Which of the node's unlabeled cards a pod's replicas sit on is not observable, so each pod
   is spread evenly over them: on each of k cards it holds `replica_count` = r / k of its
   share (1/replicas per replica). A card then carries
   the node's mean load, and a card is scaled down only when the whole node is over-committed
   (placing pods on the card they were seen on overloaded some cards and lost card-hours).
3. Its lifetime in the window is split at the hour: held hours per pod, card and hour.
4. Activity, idle and memory are the card's (what the shown series says for that hour), since
   DCGM cannot split a shared card.
"""

from __future__ import annotations

import json
from datetime import timedelta

import polars as pl

from gpuledger.analytics.devices.registry import pod_holder_modes
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.devices import pods_on_nodes


def _gpu_count(requests: str | None) -> int:
    try:
        data = json.loads(requests or "{}")
        return max(1, int(float(data.get("nvidia.com/gpu", 1))))
    except (ValueError, TypeError, AttributeError):
        return 1


def split_unlabeled(
    wh: Warehouse, held: pl.DataFrame, gpus: pl.DataFrame, window: Window
) -> pl.DataFrame:
    """`held` with the rows of unlabeled shared cards replaced by pod-derived rows (steps 1-4)."""
    shared = gpus.filter(pl.col("card_mode").is_in(pod_holder_modes())).select("uuid", "gpu_node")
    if shared.is_empty():
        return held.with_columns(pl.lit(1.0).alias("replica_count"))
    on_shared = held.join(shared, on="uuid", how="semi")
    labeled = on_shared.filter(pl.col("vgpu").is_not_null())["uuid"].unique()
    cards = shared.filter(
        pl.col("uuid").is_in(on_shared["uuid"].unique().implode())
        & ~pl.col("uuid").is_in(labeled.implode())
    )
    keep = held.join(cards, on="uuid", how="anti").with_columns(pl.lit(1.0).alias("replica_count"))
    if cards.is_empty():
        return keep
    shown = held.join(cards, on="uuid", how="semi")
    card_hours = shown.group_by("uuid", "ts").agg(
        (pl.col("idle_hours").sum() / pl.col("held_hours").sum()).alias("_idle_frac"),
        (pl.col("held_idle_hours").sum() / pl.col("held_hours").sum()).alias("_held_idle_frac"),
        pl.col("active_ratio").mean(),
        pl.col("fb_used_max_mib").max(),
    )
    derived = _pod_rows(wh, cards, window)
    if derived.is_empty():
        return keep
    derived = derived.join(card_hours, on=["uuid", "ts"], how="left").with_columns(
        (pl.col("held_hours") * pl.col("_idle_frac").fill_null(0.0)).alias("idle_hours"),
        (pl.col("held_hours") * pl.col("_held_idle_frac").fill_null(0.0)).alias("held_idle_hours"),
        pl.lit(None, dtype=pl.String).alias("vgpu"),
        pl.lit(None, dtype=pl.String).alias("profile"),
        pl.lit(-1, dtype=pl.Int32).alias("gpu_i_id"),
    )
    return pl.concat([keep, derived.select(keep.columns)], how="vertical_relaxed")


def _pod_rows(wh: Warehouse, cards: pl.DataFrame, window: Window) -> pl.DataFrame:
    nodes = cards["gpu_node"].unique().to_list()
    pods = pods_on_nodes(wh, window.start, window.end, nodes)
    if pods.is_empty():
        return pl.DataFrame()
    node_cards = {
        node: sorted(group["uuid"].to_list())
        for (node,), group in cards.group_by("gpu_node")
    }
    rows: list[dict[str, object]] = []
    for p in pods.iter_rows(named=True):
        ring = node_cards.get(p["node"])
        if not ring:
            continue
        spread = _gpu_count(p["requests"]) / len(ring)
        start = max(p["start_ts"], window.start)
        end = min(p["end_ts"], window.end)
        for uuid in ring:
            rows.append({"namespace": p["namespace"], "pod": p["pod"], "node": p["node"], "uuid": uuid,
                         "replica_count": spread, "start": start, "end": end})
    if not rows:
        return pl.DataFrame()
    spans = pl.DataFrame(rows).with_columns(
        pl.col("replica_count").cast(pl.Float64),
        pl.datetime_ranges(
            pl.col("start").dt.truncate("1h"), pl.col("end") - timedelta(microseconds=1),
            interval="1h", time_zone="UTC",
        ).alias("ts"),
    ).explode("ts")
    overlap = (
        pl.min_horizontal(pl.col("end"), pl.col("ts") + timedelta(hours=1))
        - pl.max_horizontal(pl.col("start"), pl.col("ts"))
    ).dt.total_microseconds() / 3.6e9
    return spans.with_columns(overlap.alias("held_hours")).filter(pl.col("held_hours") > 0).drop(
        "start", "end"
    )
