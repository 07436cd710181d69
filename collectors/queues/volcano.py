"""Volcano (`scheduling.volcano.sh/v1beta1`) as a `QueueCollector`: the second queue system.

Inventory: Queues (cluster-scoped; `spec.capability`, `deserved`, `guarantee`, `weight`,
`reclaimable`, `parent` for hierarchical queues) and PodGroups (namespaced; `spec.queue` names
the Queue a gang is submitted to, which is how a Queue finds its teams). Each is stored whole
(`spec` as JSON) in table `queues` under its own kind, so Kueue and Volcano objects sit side by
side; a Queue's cohort is its parent (hierarchical queues share within their parent), a
PodGroup has none. PodGroup status (phase, conditions) is kept in the stored spec under
`_status`, because preemption detection reads it and Volcano records evictions there.

Metrics: the scheduler's `volcano_queue_*` series (`collectors.queues._volcano_metrics`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuledger.collectors import kueue_metrics
from gpuledger.collectors.prom_parse import REPLICA_LABELS
from gpuledger.collectors.queues import COLLECTORS, QueueResource
from gpuledger.collectors.queues import _volcano_metrics as metrics

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.collectors.chunks import Chunk
    from gpuledger.collectors.prom_parse import Matrix
    from gpuledger.collectors.quality import Quality

GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"
KINDS = {"Queue": "queues", "PodGroup": "podgroups"}
QUEUE_LABEL = "volcano.sh/queue-name"
"""The label Volcano's job controller puts on every pod of a vcjob (and the queue annotation's
key for plain pods submitted with `schedulerName: volcano`)."""
STATUS_KEY = "_status"
"""Where a PodGroup's status (phase, conditions) is kept inside its stored spec."""


class VolcanoCollector:
    """Reads Volcano objects and metrics; writes nothing."""

    name = "volcano"
    resources = tuple(QueueResource(kind, GROUP, VERSION, plural) for kind, plural in KINDS.items())
    pod_queue_label = QUEUE_LABEL
    metric_labels = kueue_metrics.LABELS

    def row(self, resource: QueueResource, item: Mapping[str, Any], at: datetime) -> dict[str, Any]:
        meta = item.get("metadata") or {}
        spec = dict(item.get("spec") or {})
        if resource.kind == "PodGroup":
            status = item.get("status") or {}
            spec[STATUS_KEY] = {"phase": status.get("phase"), "conditions": status.get("conditions") or []}
        return {
            "kind": resource.kind, "name": meta["name"], "namespace": meta.get("namespace") or "",
            "cohort": spec.get("parent") if resource.kind == "Queue" else None,
            "spec": json.dumps(spec, sort_keys=True),
            "resource_version": meta.get("resourceVersion"), "observed_at": at,
        }

    def metric_queries(
        self, step: timedelta, *, replica_labels: Sequence[str] = REPLICA_LABELS,
    ) -> dict[str, str]:
        return metrics.queries(step, replica_labels)

    def queue_samples(
        self, matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality, *,
        replica_labels: Sequence[str] = REPLICA_LABELS,
    ) -> pl.DataFrame:
        # The queries already name their series as Kueue's do (cluster_queue, flavor, resource):
        # one table shape, one builder (docs/decisions/0037).
        return kueue_metrics.build_queue_samples(matrices, chunk, now, quality,
                                                 replica_labels=replica_labels)


VOLCANO = COLLECTORS.register("volcano", VolcanoCollector())
