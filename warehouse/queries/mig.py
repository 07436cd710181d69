"""Read queries of the MIG optimizer: the fleet's cards and layouts, who is on them, demand seen.

Why here: only `warehouse/` speaks SQL; `optimizer.mig.observed` turns these frames into the
optimizer's `Fleet` and `Demand` and never sees a statement.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.warehouse.queries.freshness import newest_ts
from gpuledger.warehouse.queries.pods import newest_incarnation
from gpuledger.warehouse.sample_layout import SAMPLES_VIEW

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse


def gpus_with_nodes(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every card with its node facts, by node and index: `uuid`, `node`, `gpu_index`, `model`,
    `pool`, `sharing_mode`, `mig_config`, `resource_version`, `labels` (node labels, JSON)."""
    return wh.query(
        "SELECT g.uuid, g.node, g.gpu_index, g.model, g.pool, g.sharing_mode, n.mig_config, "
        "n.resource_version, n.labels FROM gpus g LEFT JOIN nodes n ON n.node = g.node "
        "ORDER BY g.node, g.gpu_index"
    )


def last_instance_end(wh: ReadableWarehouse) -> datetime | None:
    """The newest `mig_instances.end_ts` (the last layout observation), or None."""
    value = wh.scalar("SELECT max(end_ts) FROM mig_instances")
    return value if isinstance(value, datetime) else None


def instance_counts_since(wh: ReadableWarehouse, since: datetime) -> pl.DataFrame:
    """MIG instances alive at or after `since`, counted per card and profile: `uuid`,
    `profile`, `n`."""
    return wh.query(
        "SELECT uuid, profile, count(*) AS n FROM mig_instances WHERE end_ts >= ? GROUP BY uuid, profile",
        [since],
    )


def holders_at_last_sample(wh: ReadableWarehouse) -> pl.DataFrame:
    """Pods on each device at the newest `gpu_samples` time, with their owner and labels:
    `uuid`, `gpu_i_id`, `mig_profile`, `namespace`, `pod`, `owner_kind`, `labels` (JSON)."""
    owners = newest_incarnation({"owner_kind": "p.owner_kind", "labels": "p.labels"})  # one row a name
    return wh.query(
        f"WITH owners AS ({owners}) "
        "SELECT s.uuid, s.gpu_i_id, s.mig_profile, s.namespace, s.pod, p.owner_kind, p.labels "
        "FROM gpu_samples s LEFT JOIN owners p ON p.namespace = s.namespace AND p.pod = s.pod "
        "WHERE s.ts = ? AND s.pod IS NOT NULL ORDER BY s.uuid, s.gpu_i_id, s.pod",
        [last_sample_time(wh)],
    )


def last_sample_time(wh: ReadableWarehouse) -> datetime | None:
    """The newest `gpu_samples.ts`, or None when there are no samples (read where
    `freshness.newest_ts` reads it: the values table's statistics, not the view)."""
    return newest_ts(wh, SAMPLES_VIEW)


def held_devices(wh: ReadableWarehouse, last: datetime, lookback: timedelta) -> pl.DataFrame:
    """Distinct devices that held a pod in `(last - lookback, last]`: `uuid`, `gpu_i_id`,
    `mig_profile`."""
    return wh.query(
        "SELECT DISTINCT uuid, gpu_i_id, mig_profile FROM gpu_samples "
        "WHERE ts > ? AND ts <= ? AND pod IS NOT NULL",
        [last - lookback, last],
    )
