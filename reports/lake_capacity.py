"""Capacity now in the org lake: each cluster publishes what is free in each shape and its queues'
headroom; `gpuledger capacity --lake` and `gpuledger why --lake` read every cluster's.

Why a partition of its own (docs/decisions/0216): a month's partition holds the bill and the
inventory as it stood at publish, not what capacity now needs (running requests, MIG instances,
HAMi allocations, DRA claims, quotas and Kueue's usage). Copying all of that per cluster would
make every reader recompute capacity with its own rules; the cluster computes it once, with the
rules it runs (`analytics.waiting.fleet`), and publishes the answer:

1. `LAKE/cluster=NAME/period=now/`: tables `capacity_now` (one row per pool, model and shape:
   `ready`, `placeable`, `nodes`, `per_card`) and `queue_headroom` (one row per ClusterQueue,
   flavor and resource), each with a `cluster` column; the facts name the document's schema
   (`gpuledger.capacity/v1`, the version a reader checks) and the inventory's time (`at`, also
   the manifest's watermark).
2. It is committed like a month's (`warehouse.lake.partition.publish_partition`: content-named
   files, manifest last and signed, the same numbers again a no-op) and always a draft: "now" is
   replaced by the next publish, never finalized.
3. A reader reads it like the bill's partitions (`warehouse.lake.reader`: manifest signature and
   content digest, each file's checksum, row count and content), so an edited lake is one error
   line, never a silently different answer; a partition of another schema version is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import polars as pl

from gpuledger.analytics.capacity.headroom import Headroom
from gpuledger.analytics.capacity.now import ShapeFree
from gpuledger.analytics.waiting.fleet import CAPACITY_SCHEMA, FleetNow
from gpuledger.core.config_lake import check_cluster_name
from gpuledger.core.errors import InputError
from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake
from gpuledger.warehouse.lake.partition import PublishResult, publish_partition
from gpuledger.warehouse.lake.reader import partitions, read_table

PERIOD = "now"
"""The partition's `period` value: not a month, so no bill reader ever lists it."""
CAPACITY_SCHEMA_COLUMNS: dict[str, Any] = {
    "cluster": pl.String, "pool": pl.String, "model": pl.String, "shape": pl.String,
    "ready": pl.Float64, "placeable": pl.Int64, "nodes": pl.String, "per_card": pl.String,
}
HEADROOM_SCHEMA_COLUMNS: dict[str, Any] = {
    "cluster": pl.String, "cluster_queue": pl.String, "cohort": pl.String, "flavor": pl.String,
    "resource": pl.String, "nominal": pl.Float64, "used": pl.Float64, "free": pl.Float64,
    "borrowable": pl.Float64, "lendable": pl.Float64, "borrowers": pl.String,
}


def _stamp(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


def capacity_frames(fleet: FleetNow, cluster: str) -> dict[str, pl.DataFrame]:
    """Step 1: the two tables, rows in the document's order (lists as JSON text: a Parquet
    table's content digest is taken over CSV)."""
    capacity = pl.DataFrame([
        {"cluster": cluster, "pool": r.pool, "model": r.model, "shape": r.shape, "ready": float(r.ready),
         "placeable": r.placeable, "nodes": json.dumps(list(r.nodes)),
         "per_card": json.dumps([[c, f] for c, f in r.per_card])}
        for r in fleet.capacity], schema=CAPACITY_SCHEMA_COLUMNS)
    queues = pl.DataFrame([
        {"cluster": cluster, "cluster_queue": h.cluster_queue, "cohort": h.cohort, "flavor": h.flavor,
         "resource": h.resource, "nominal": h.nominal, "used": h.used, "free": h.free,
         "borrowable": h.borrowable, "lendable": h.lendable, "borrowers": json.dumps(list(h.borrowers))}
        for h in fleet.headroom], schema=HEADROOM_SCHEMA_COLUMNS)
    return {"capacity_now": capacity, "queue_headroom": queues}


def publish_capacity(lake: Lake, cluster: str, fleet: FleetNow, *,
                     now: datetime | None = None) -> PublishResult | None:
    """Steps 1-2; None when the warehouse has no inventory (nothing to say about now)."""
    try:
        check_cluster_name(cluster)
    except ValueError as exc:
        raise InputError(f"publish --cluster: {exc}") from None
    if fleet.at is None:
        return None
    at = _stamp(fleet.at)
    return publish_partition(lake, cluster, PERIOD, capacity_frames(fleet, cluster),
                             bill={"schema": CAPACITY_SCHEMA, "at": at}, watermark=at, now=now)


@dataclass(frozen=True)
class LakeCapacity:
    """Every cluster's published capacity now (step 3)."""

    capacity: list[ShapeFree]
    headroom: list[Headroom]
    at: dict[str, str | None]
    """cluster → when its inventory was observed."""


def read_capacity(lake: Lake, clusters: tuple[str, ...] | None = None) -> LakeCapacity:
    """Step 3: every cluster's `period=now` partition, verified, as analytics rows."""
    try:
        parts = partitions(lake, PERIOD, clusters)
    except LakeError as exc:
        if "has published" not in str(exc):
            raise
        raise LakeError(f"lake {lake.uri}: no cluster has published its capacity now "
                        "(`gpuledger publish` writes it)") from None
    for part in parts:
        schema = part.manifest.bill.get("schema")
        if schema != CAPACITY_SCHEMA:
            raise LakeError(f"lake {lake.uri}: {part.manifest.cluster}'s capacity is {schema!r}, "
                            f"this gpuledger reads {CAPACITY_SCHEMA} (publish it again with this version)")
    capacity = read_table(lake, parts, "capacity_now")
    queues = read_table(lake, parts, "queue_headroom")
    return LakeCapacity(
        capacity=[ShapeFree(r["cluster"], r["pool"], r["model"], r["shape"], float(r["ready"]),
                            int(r["placeable"]), tuple(json.loads(r["nodes"])),
                            tuple((str(c), float(f)) for c, f in json.loads(r["per_card"])))
                  for r in capacity.iter_rows(named=True)],
        headroom=[Headroom(r["cluster"], r["cluster_queue"], r["cohort"], r["flavor"], r["resource"],
                           r["nominal"], r["used"], r["free"], r["borrowable"], r["lendable"],
                           tuple(json.loads(r["borrowers"])))
                  for r in queues.iter_rows(named=True)],
        at={p.manifest.cluster: p.manifest.bill.get("at") for p in parts},
    )
