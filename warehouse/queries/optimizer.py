"""Read queries of the quota optimizer: queue objects, queue demand samples, pod requests.

Why here: only `warehouse/` speaks SQL; `optimizer.quota.inputs` and the queue systems' quota
readers (`optimizer.quota.queues.<system>`) call these named functions and never see a statement.
The queries are neutral about the queue system: they take the object kind they read, which is
why the dashboard's Volcano Queues table (`dashboards.queue_views`) and the demo's summary read
their Queues through `queue_objects` too.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse import Warehouse


def queue_objects(wh: Warehouse, kind: str) -> pl.DataFrame:
    """Stored queue objects of `kind`: `name`, `spec` (JSON text), `resource_version`, by name."""
    return wh.query(
        "SELECT name, CAST(spec AS VARCHAR) AS spec, resource_version FROM queues"
        " WHERE kind = ? ORDER BY name", [kind],
    )


def last_queue_sample(wh: Warehouse) -> datetime | None:
    """The newest `queue_samples.ts`, or None when the table is empty."""
    value = wh.scalar("SELECT max(ts) FROM queue_samples")
    return value if isinstance(value, datetime) else None


def queue_samples_after(wh: Warehouse, after: datetime) -> pl.DataFrame:
    """Queue samples with `ts > after`, in time order: `ts`, `cluster_queue`, `flavor`,
    `resource`, `usage`, `pending_workloads`."""
    return wh.query(
        "SELECT ts, cluster_queue, flavor, resource, usage, pending_workloads FROM queue_samples "
        "WHERE ts > ? ORDER BY ts", [after],
    )


def pod_requests_by_queue(wh: Warehouse, kind: str) -> pl.DataFrame:
    """Pods submitted to a namespaced queue object of `kind` (its name is the pod's `queue`, in
    the pod's namespace): `spec` (the queue object's spec, JSON text) and `gpu_requests` (JSON),
    for pods with requests."""
    return wh.query(
        "SELECT CAST(q.spec AS VARCHAR) AS spec, CAST(p.gpu_requests AS VARCHAR) AS gpu_requests"
        " FROM pods p JOIN queues q ON q.kind = ?"
        " AND q.namespace = p.namespace AND q.name = p.queue WHERE p.gpu_requests IS NOT NULL",
        [kind],
    )
