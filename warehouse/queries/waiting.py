"""Read queries of capacity now and of waiting workloads (`analytics.waiting.fleet`): the
newest inventory, the pods running on it, the stored pending statuses and Kueue's queue usage.

Why here: only `warehouse/` speaks SQL. "Now" is the newest Kubernetes snapshot
(`max(nodes.observed_at)`): a pod runs now when its stored lifetime reaches that snapshot.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.protocols import ReadableWarehouse


def snapshot_time(wh: ReadableWarehouse) -> datetime | None:
    """When the newest node inventory was observed, or None."""
    value = wh.scalar("SELECT max(observed_at) FROM nodes")
    return value if isinstance(value, datetime) else None


def nodes_now(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every node of the newest inventory: `node`, `pool`, `model`, `sharing_mode`,
    `labels`, `allocatable` (JSON text)."""
    return wh.query(
        "SELECT node, pool, model, sharing_mode, CAST(labels AS VARCHAR) AS labels, "
        "CAST(allocatable AS VARCHAR) AS allocatable FROM nodes ORDER BY node"
    )


def running_requests(wh: ReadableWarehouse, at: datetime) -> pl.DataFrame:
    """GPU requests of the pods placed on a node and alive at `at`: `node`, `gpu_requests`."""
    return wh.query(
        "SELECT node, CAST(gpu_requests AS VARCHAR) AS gpu_requests FROM pods "
        "WHERE node IS NOT NULL AND end_ts >= ? ORDER BY node, namespace, pod", [at],
    )


def pending_rows(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every stored `pending_workloads` row (JSON columns as text), oldest first."""
    return wh.query(
        "SELECT kind, namespace, name, source, queue, owner_kind, owner_name, "
        "CAST(requests AS VARCHAR) AS requests, pods, CAST(node_selector AS VARCHAR) AS node_selector, "
        "priority_class, CAST(conditions AS VARCHAR) AS conditions, event_reason, event_message, "
        "nominated_node, CAST(claims AS VARCHAR) AS claims, created_at, first_seen, last_seen "
        "FROM pending_workloads ORDER BY created_at, kind, namespace, name"
    )


def queue_usage(wh: ReadableWarehouse) -> pl.DataFrame:
    """Kueue's reserved quota: `cluster_queue`, `flavor`, `resource`, `total`, `borrowed`."""
    return wh.query("SELECT cluster_queue, flavor, resource, total, borrowed FROM queue_usage "
                    "ORDER BY cluster_queue, flavor, resource")


def namespace_teams(wh: ReadableWarehouse) -> pl.DataFrame:
    """`namespace`, `team` as stored at collection."""
    return wh.query("SELECT namespace, team FROM namespaces ORDER BY namespace")


def local_queues(wh: ReadableWarehouse) -> pl.DataFrame:
    """Every stored LocalQueue: `namespace`, `name`, `spec` (JSON text; `clusterQueue`)."""
    return wh.query("SELECT namespace, name, CAST(spec AS VARCHAR) AS spec FROM queues "
                    "WHERE kind = 'LocalQueue' ORDER BY namespace, name")


_DRA_FREE = """
WITH api_claims AS (SELECT * FROM dra_claims WHERE coalesce(source, 'api') = 'api'),
last AS (SELECT max(end_ts) AS t FROM api_claims),
held AS (SELECT DISTINCT c.driver, c.pool, c.device FROM api_claims c, last WHERE c.end_ts >= last.t),
busy AS (SELECT DISTINCT d.parent_uuid FROM dra_devices d JOIN held USING (driver, pool, device)),
devices AS (SELECT * FROM dra_devices WHERE coalesce(source, 'api') = 'api')
SELECT d.node, d.model, CASE WHEN d.kind = 'gpu' THEN 'dra gpu' ELSE 'dra mig-' || d.profile END AS shape,
       count(*) AS free
FROM devices d
LEFT JOIN held h USING (driver, pool, device)
WHERE h.device IS NULL AND (d.dynamic = 0 OR d.kind = 'gpu')
  AND NOT (d.kind = 'gpu' AND d.parent_uuid IN (SELECT parent_uuid FROM busy))
GROUP BY ALL ORDER BY ALL
"""


def dra_free(wh: ReadableWarehouse) -> pl.DataFrame:
    """Published DRA devices no claim holds at the newest claim observation: `node`, `model`,
    `shape` (`dra gpu` | `dra mig-<profile>`), `free` (analytics.capacity.now step 3)."""
    return wh.query(_DRA_FREE)


_HAMI_LEFT = """
WITH last AS (SELECT max(end_ts) AS t FROM vgpu_allocations),
used AS (SELECT a.uuid, sum(a.mem_mib) AS mem, sum(a.cores_pct) AS cores
         FROM vgpu_allocations a, last WHERE a.end_ts >= last.t GROUP BY a.uuid)
SELECT g.node, g.uuid, g.model, g.memory_mib, coalesce(u.mem, 0) AS used_mib,
       coalesce(u.cores, 0) AS used_cores
FROM gpus g LEFT JOIN used u USING (uuid)
WHERE g.sharing_mode = 'vgpu' ORDER BY g.node, g.uuid
"""


def hami_cards(wh: ReadableWarehouse) -> pl.DataFrame:
    """HAMi's cards with what its allocations alive at the newest observation use: `node`,
    `uuid`, `model`, `memory_mib`, `used_mib`, `used_cores` (percent)."""
    return wh.query(_HAMI_LEFT)
