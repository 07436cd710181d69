"""The priority and preemption tables: who ran at which priority, and who was thrown off.

Declared apart from `core.frames` (which has no room left) and kept off table `pods` on
purpose: the pods frame is built by three producers (the Kubernetes collector, the KSM
collector, the simulator), and a pod's priority is known only where the pod object itself is
read. A side table keyed like `pods` lets any producer that knows priorities add them without
every other producer changing shape; analytics joins it on (namespace, pod).

`preemptions` holds one row per victim pod (a pod name is preempted at most once: the
workload's next attempt is a new pod). Its details are nullable because the sources differ in
what they still see: a pod condition comes with the pod (node, start, requests), a scheduler
event may outlive the pod, whose facts are then joined from the stored `pods` table at
billing time (`analytics.billing.preemption`).
"""

from __future__ import annotations

from gpuledger.core.table_spec import TS, TableSpec
from gpuledger.core.table_spec import col as _c

POD_PRIORITIES = TableSpec(
    "pod_priorities", "dimension",
    (
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False),
        _c("priority_class", "VARCHAR", doc="spec.priorityClassName ('' when unset)"),
        _c("priority", "INTEGER", doc="spec.priority, the class's value as admitted"),
        _c("observed_at", TS),
    ),
    key=("namespace", "pod"),
    doc="Each GPU pod's PriorityClass and priority value.",
)

PREEMPTIONS = TableSpec(
    "preemptions", "dimension",
    (
        _c("namespace", "VARCHAR", False),
        _c("pod", "VARCHAR", False, "the victim pod (for a Kueue Workload: the Workload's name)"),
        _c("preempted_at", TS, False),
        _c("source", "VARCHAR", False,
           "pod_condition | kueue_workload | volcano_podgroup | scheduler_event"),
        _c("reason", "VARCHAR"),
        _c("owner_kind", "VARCHAR", doc="the victim's controller (its pods are the victims when the "
           "row names a Workload or PodGroup)"),
        _c("owner_name", "VARCHAR"),
        _c("node", "VARCHAR"),
        _c("queue", "VARCHAR"),
        _c("priority_class", "VARCHAR"),
        _c("gpus", "DOUBLE", doc="whole GPUs (or MIG instances) the victim held"),
        _c("run_start", TS, doc="when the victim started running"),
        _c("checkpoint_at", TS, doc="its last checkpoint, when the workload exposes one"),
        _c("observed_at", TS),
    ),
    key=("namespace", "pod"),
    doc="GPU pods preempted or evicted by a scheduler, with what they had run.",
)
