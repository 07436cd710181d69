"""Read queries for Volcano queues and preemptions: who submits to a Queue, pod sizes per Queue,
and the stored preemption records with what billing needs to price them (each node's card
model, each pod's last stored requests, pods' priority classes).

Why here: only `warehouse/` speaks SQL; `analytics.teams.volcano`, `optimizer.quota.queues.volcano`,
`analytics.billing.preemption` and `analytics.billing.priority_class` hold the rules.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from gpuledger.warehouse.queries.optimizer import POD_QUEUE_REQUESTS
from gpuledger.warehouse.queries.pods import newest_incarnation

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse import Warehouse


def podgroup_teams(wh: Warehouse) -> pl.DataFrame:
    """Every PodGroup whose namespace has a stored team: `queue` (its `spec.queue`, Volcano's
    default `default` when unset), `team`."""
    return wh.query(
        "SELECT coalesce(json_extract_string(q.spec, '$.queue'), 'default') AS queue, n.team"
        " FROM queues q JOIN namespaces n ON n.namespace = q.namespace"
        " WHERE q.kind = 'PodGroup' AND n.team IS NOT NULL AND n.team <> ''"
        " ORDER BY queue, n.team"
    )


def pod_requests_by_volcano_queue(wh: Warehouse) -> pl.DataFrame:
    """Pods whose queue label names a stored Volcano Queue: `queue`, `gpu_requests` (JSON text)
    and `pods` (how many pods had that pair); each pod once, as its newest incarnation has it."""
    return wh.query(
        f"WITH p AS ({POD_QUEUE_REQUESTS}) SELECT p.queue, p.gpu_requests, count(*) AS pods FROM p"
        " JOIN queues q ON q.kind = 'Queue' AND q.name = p.queue WHERE p.gpu_requests IS NOT NULL"
        " GROUP BY ALL ORDER BY ALL"
    )


def preemptions_between(wh: Warehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """Preemptions with `start <= preempted_at < end`, each row's victim pods resolved.

    A row with its own facts (`gpus` set: a pod condition) is its own victim. A row naming a
    pod by event, or a controller (Workload, PodGroup), takes its victims from table `pods`:
    the pod of that name, or the pods of that controller alive at the preemption. Columns:
    namespace, pod (victim), preempted_at, source, node, queue, priority_class, gpu_requests
    (JSON, NULL for own-fact rows), gpus, run_start, checkpoint_at.
    """
    return wh.query(
        """
WITH p AS (SELECT * FROM preemptions WHERE preempted_at >= ? AND preempted_at < ?),
own AS (
    SELECT namespace, pod, preempted_at, source, node, queue, priority_class,
           NULL::VARCHAR AS gpu_requests, gpus, run_start, checkpoint_at
    FROM p WHERE gpus IS NOT NULL
),
resolved AS (
    SELECT p.namespace, v.pod, p.preempted_at, p.source, v.node, v.queue,
           coalesce(p.priority_class, pp.priority_class) AS priority_class,
           CAST(v.gpu_requests AS VARCHAR) AS gpu_requests, NULL::DOUBLE AS gpus,
           v.start_ts AS run_start, p.checkpoint_at
    FROM p JOIN pods v ON v.namespace = p.namespace
        AND ((p.owner_name IS NULL AND v.pod = p.pod)
             OR (p.owner_name IS NOT NULL AND v.owner_name = p.owner_name))
        AND v.start_ts <= p.preempted_at AND v.end_ts >= p.preempted_at - INTERVAL 10 MINUTE
    LEFT JOIN pod_priorities pp ON pp.namespace = v.namespace AND pp.pod = v.pod
    WHERE p.gpus IS NULL
)
SELECT * FROM own UNION ALL SELECT * FROM resolved ORDER BY preempted_at, namespace, pod
""",
        [start, end],
    )


def pod_priority_classes(wh: Warehouse) -> pl.DataFrame:
    """`namespace`, `pod`, `priority_class`, `priority` of every pod with a stored priority."""
    return wh.query("SELECT namespace, pod, priority_class, priority FROM pod_priorities")


def node_models(wh: Warehouse) -> pl.DataFrame:
    """One card model per node (the first by name where a node mixes models): `node`, `model`."""
    return wh.query("SELECT node, min(model) AS model FROM gpus GROUP BY node")


def last_pod_requests(wh: Warehouse) -> pl.DataFrame:
    """Each pod's GPU requests as last stored (its newest interval's): `namespace`, `pod`,
    `stored` (JSON text, or NULL)."""
    return wh.query(newest_incarnation({"stored": "CAST(p.gpu_requests AS VARCHAR)"}))


def pod_keys(wh: Warehouse) -> pl.DataFrame:
    """Every stored pod once: `namespace`, `pod`."""
    return wh.query("SELECT DISTINCT namespace, pod FROM pods")
