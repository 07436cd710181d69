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

from gpuledger.warehouse.queries.pods import newest_incarnation

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


def queue_sample_times(wh: Warehouse, after: datetime) -> pl.DataFrame:
    """The distinct `queue_samples.ts` with `ts > after`, in order (one column `ts`)."""
    return wh.query("SELECT DISTINCT ts FROM queue_samples WHERE ts > ? ORDER BY ts", [after])


def queue_sample_sums(wh: Warehouse, after: datetime, origin: datetime, bucket_us: int) -> pl.DataFrame:
    """Queue samples with `ts > after` summed per bucket of `bucket_us` microseconds from
    `origin` and series: `b` (bucket number), `cluster_queue`, `flavor`, `resource`, `usage`,
    `pending_workloads` (sums) and `rows` (samples summed). The optimizer reads a month of
    one-minute samples this way: millions of rows become one per bucket and series."""
    return wh.query(
        "SELECT (epoch_us(ts) - epoch_us(?::TIMESTAMPTZ)) // ? AS b, cluster_queue, flavor, resource,"
        " sum(usage) AS usage, sum(pending_workloads) AS pending_workloads, count(*) AS rows"
        " FROM queue_samples WHERE ts > ? GROUP BY ALL", [origin, bucket_us, after],
    )


def queue_samples_after(wh: Warehouse, after: datetime, before: datetime | None = None) -> pl.DataFrame:
    """Queue samples with `ts > after` (and `ts < before`, given), in time order: `ts`,
    `cluster_queue`, `flavor`, `resource`, `usage`, `pending_workloads`."""
    bound, params = ("", [after]) if before is None else (" AND ts < ?", [after, before])
    return wh.query(
        "SELECT ts, cluster_queue, flavor, resource, usage, pending_workloads FROM queue_samples "
        f"WHERE ts > ?{bound} ORDER BY ts", params,
    )


POD_QUEUE_REQUESTS = newest_incarnation({"queue": "p.queue",
                                         "gpu_requests": "CAST(p.gpu_requests AS VARCHAR)"})
"""Each pod once: its `queue` and `gpu_requests` (JSON text) as its newest incarnation has them."""


def pod_requests_by_queue(wh: Warehouse, kind: str) -> pl.DataFrame:
    """Pods submitted to a namespaced queue object of `kind` (its name is the pod's `queue`, in
    the pod's namespace): `spec` (the queue object's spec, JSON text), `gpu_requests` (JSON) and
    `pods` (how many pods had that pair), for pods with requests; each pod once, as its newest
    incarnation has it (`newest_incarnation`: a pod stored in two spans is one pod)."""
    return wh.query(
        f"WITH p AS ({POD_QUEUE_REQUESTS}) SELECT CAST(q.spec AS VARCHAR) AS spec, p.gpu_requests,"
        " count(*) AS pods FROM p JOIN queues q ON q.kind = ?"
        " AND q.namespace = p.namespace AND q.name = p.queue WHERE p.gpu_requests IS NOT NULL"
        " GROUP BY ALL ORDER BY ALL",
        [kind],
    )


def queued_pods_overlapping(wh: Warehouse, kind: str, start: datetime, end: datetime) -> pl.DataFrame:
    """Pods submitted to a namespaced queue object of `kind` that ran during [start, end), one row
    per pod run, in start order: `spec` (the queue object's spec, JSON text), `namespace`, `pod`,
    `node`, `gpu_requests` (JSON text), `start_ts`, `end_ts` (the scheduling twin's replay window)."""
    return wh.query(
        "SELECT CAST(q.spec AS VARCHAR) AS spec, p.namespace, p.pod, p.node,"
        " CAST(p.gpu_requests AS VARCHAR) AS gpu_requests, p.start_ts, p.end_ts"
        " FROM pods p JOIN queues q ON q.kind = ? AND q.namespace = p.namespace AND q.name = p.queue"
        " WHERE p.gpu_requests IS NOT NULL AND p.start_ts < ? AND p.end_ts > ?"
        " ORDER BY p.start_ts, p.namespace, p.pod",
        [kind, end, start],
    )
