"""Kueue (`kueue.x-k8s.io/v1beta2`) as a `QueueCollector`: the first queue system of the seam.

Inventory: ClusterQueues, LocalQueues, ResourceFlavors and Cohorts, each stored whole (`spec`
as JSON) with its cohort (`spec.cohortName`, or a Cohort's `spec.parentName`). Metrics: Kueue's
own Prometheus series, translated by `collectors.kueue_metrics`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuledger.collectors import kueue_metrics
from gpuledger.collectors.prom_parse import REPLICA_LABELS
from gpuledger.collectors.queues import COLLECTORS, QueueResource

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.collectors.chunks import Chunk
    from gpuledger.collectors.prom_parse import Matrix
    from gpuledger.collectors.quality import Quality

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
KINDS = {"ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
         "ResourceFlavor": "resourceflavors", "Cohort": "cohorts"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class KueueCollector:
    """Reads Kueue objects and metrics; writes nothing."""

    name = "kueue"
    resources = tuple(QueueResource(kind, GROUP, VERSION, plural) for kind, plural in KINDS.items())
    pod_queue_label = QUEUE_LABEL
    metric_labels = kueue_metrics.LABELS

    def row(self, resource: QueueResource, item: Mapping[str, Any], at: datetime) -> dict[str, Any]:
        meta = item.get("metadata") or {}
        spec = item.get("spec") or {}
        return {
            "kind": resource.kind, "name": meta["name"], "namespace": meta.get("namespace") or "",
            "cohort": spec.get("cohortName") or spec.get("parentName"),
            "spec": json.dumps(spec, sort_keys=True),
            "resource_version": meta.get("resourceVersion"), "observed_at": at,
        }

    def metric_queries(
        self, step: timedelta, *, replica_labels: Sequence[str] = REPLICA_LABELS,
    ) -> dict[str, str]:
        return kueue_metrics.queries(step, replica_labels)

    def queue_samples(
        self, matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality, *,
        replica_labels: Sequence[str] = REPLICA_LABELS,
    ) -> pl.DataFrame:
        return kueue_metrics.build_queue_samples(matrices, chunk, now, quality,
                                                 replica_labels=replica_labels)


KUEUE = COLLECTORS.register("kueue", KueueCollector())
