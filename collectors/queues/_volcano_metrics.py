"""Volcano's scheduler metrics (`volcano_queue_*`) as the `queue_samples` columns.

Volcano reports per Queue (label `queue_name`): allocated and deserved amounts of each scalar
resource (`volcano_queue_allocated_scalar_resources{resource=...}`, `..._deserved_...`, in
milli-units like every Volcano scalar, hence `/ 1000`), and the number of PodGroups per phase.
The queries rename `queue_name` to `cluster_queue` and give every series `flavor="default"`
(Volcano has no flavors; `optimizer.quota.queues.volcano.FLAVOR` is the same name), so the answers
have Kueue's shape and `kueue_metrics.build_queue_samples` builds the frame for both.

Pending workloads are PodGroups waiting to run: `Pending` (not yet admitted to the queue) plus
`Inqueue` (admitted, pods not yet bound). Volcano exposes no admission-wait histogram, so
`admission_wait_s` stays empty. Per-queue sums keep the HA replica labels, as for Kueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from gpuledger.collectors.prom_parse import REPLICA_LABELS
from gpuledger.collectors.promql import latest

FLAVOR = "default"
MILLI = 1000.0


def _named(expr: str) -> str:
    """`expr` with `cluster_queue` (from `queue_name`) and `flavor` labels added."""
    renamed = f'label_replace({expr}, "cluster_queue", "$1", "queue_name", "(.*)")'
    return f'label_replace({renamed}, "flavor", "{FLAVOR}", "queue_name", ".*")'


def queries(step: timedelta, replica_labels: Sequence[str] = REPLICA_LABELS) -> dict[str, str]:
    """PromQL per `queue_samples` column (module docstring)."""
    by = f"sum by ({', '.join(('cluster_queue', *replica_labels))})"
    waiting, admitted = (latest(f"volcano_queue_pod_group_{phase}_count", step)
                         for phase in ("pending", "inqueue"))
    pending = f"(({waiting} + {admitted}) or {waiting} or {admitted})"
    return {
        "usage": _named(f"{latest('volcano_queue_allocated_scalar_resources', step)} / {MILLI:g}"),
        "nominal_quota": _named(f"{latest('volcano_queue_deserved_scalar_resources', step)} / {MILLI:g}"),
        "pending_workloads": f"{by} ({_named(pending)})",
    }
