"""The pending tables: each workload that waits, with the status its controllers wrote, and each
ClusterQueue's usage as Kueue counts it (issue 35, docs/decisions/0201).

Declared apart from `core.frames` (which has no room left). `pending_workloads` stores the
status *as written* (conditions, the last scheduling event) and no verdict: why a workload waits
is a rule (`analytics.waiting.why`) that also needs capacity and quota, so it is computed when
read, and a changed rule never meets stale stored verdicts. A row is kept after its workload
starts: `last_seen` then stops moving, and `last_seen - created_at` is how long it waited (the
history of "how long such requests usually wait").
"""

from __future__ import annotations

from gpuledger.core.table_spec import TS, TableSpec
from gpuledger.core.table_spec import col as _c

PENDING_WORKLOADS = TableSpec(
    "pending_workloads", "dimension",
    (
        _c("kind", "VARCHAR", False, "Pod | Workload | PodGroup"),
        _c("namespace", "VARCHAR", False),
        _c("name", "VARCHAR", False),
        _c("source", "VARCHAR", False, "kube-scheduler | kueue | volcano"),
        _c("queue", "VARCHAR", doc="LocalQueue (Kueue) or Queue (Volcano) it was submitted to"),
        _c("owner_kind", "VARCHAR"),
        _c("owner_name", "VARCHAR"),
        _c("requests", "JSON", doc="resource -> total amount over all its pods"),
        _c("pods", "INTEGER", doc="pods it needs (Workload pod-set counts, PodGroup minMember)"),
        _c("node_selector", "JSON", doc="spec.nodeSelector of its pod (template)"),
        _c("priority_class", "VARCHAR"),
        _c("conditions", "JSON", doc="status.conditions as the controller wrote them"),
        _c("event_reason", "VARCHAR", doc="the newest scheduling event's reason (FailedScheduling, "
           "Unschedulable)"),
        _c("event_message", "VARCHAR"),
        _c("nominated_node", "VARCHAR", doc="status.nominatedNodeName: waiting for preemption victims"),
        _c("claims", "JSON", doc="DRA claims of the pod: [{name, allocated}]"),
        _c("created_at", TS),
        _c("first_seen", TS, merge="earliest"),
        _c("last_seen", TS, merge="latest"),
    ),
    key=("kind", "namespace", "name"),
    doc="Workloads seen waiting (pending pods, unadmitted Kueue Workloads, pending Volcano "
        "PodGroups) with their status as written.",
)

QUEUE_USAGE = TableSpec(
    "queue_usage", "dimension",
    (
        _c("cluster_queue", "VARCHAR", False),
        _c("flavor", "VARCHAR", False),
        _c("resource", "VARCHAR", False),
        _c("total", "DOUBLE", False, "quota reserved by admitted workloads (status.flavorsReservation)"),
        _c("borrowed", "DOUBLE", doc="of which borrowed from the cohort"),
        _c("observed_at", TS),
    ),
    key=("cluster_queue", "flavor", "resource"),
    doc="Each ClusterQueue's reserved quota per flavor and resource, as Kueue counts it.",
)

PENDING_TABLES = (PENDING_WORKLOADS, QUEUE_USAGE)
