"""The collect stage's part of the queue-system seam: a `QueueCollector` per queue system.

Why: the Kubernetes collector and the Prometheus collector must not know which queue system
runs in the cluster. They ask `queue_collector(name)` for what to list (custom resources), how
a listed object becomes a `queues` row, which pod label names a pod's queue, and which metrics
make the `queue_samples` frame. Kueue (`collectors.queues.kueue`) is the first implementation;
another system is one more module here that registers itself (see `core.queues`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from gpuledger.core.queues import DEFAULT_QUEUE_SYSTEM, queue_registry
from gpuledger.core.registry import Registry

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.collectors.chunks import Chunk
    from gpuledger.collectors.prom_parse import Matrix
    from gpuledger.collectors.quality import Quality


@dataclass(frozen=True, slots=True)
class QueueResource:
    """One cluster-wide list of a queue system's custom resource."""

    kind: str
    group: str
    version: str
    plural: str


class QueueCollector(Protocol):
    """What the collectors need to know about one queue system (read-only)."""

    name: str
    resources: tuple[QueueResource, ...]
    """The custom resources listed into the `queues` frame (an absent CRD gives no rows)."""
    pod_queue_label: str
    """The pod label naming the queue a pod was submitted to (`pods.queue`)."""
    metric_labels: tuple[str, ...]
    """Series labels kept from the queue metrics: the key's, then the default HA replica labels
    (`prom_parse.REPLICA_LABELS`), whose copies `queue_samples` merges."""

    def row(self, resource: QueueResource, item: Mapping[str, Any], at: datetime) -> dict[str, Any]:
        """One listed object → one `queues` row (kind, name, namespace, cohort, spec, ...)."""
        ...

    def metric_queries(self, step: timedelta, *, replica_labels: Sequence[str] = ...) -> dict[str, str]:
        """PromQL per `queue_samples` column; any aggregation keeps `replica_labels` (default
        `prom_parse.REPLICA_LABELS`), so HA copies are merged, not summed."""
        ...

    def queue_samples(
        self, matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality, *,
        replica_labels: Sequence[str] = ...,
    ) -> pl.DataFrame:
        """The answers to `metric_queries` → the `queue_samples` frame of one chunk, the copies
        that differ only in `replica_labels` merged and counted `ha_duplicate`."""
        ...


COLLECTORS: Registry[QueueCollector] = queue_registry("collect", __name__)


def queue_collector(name: str = DEFAULT_QUEUE_SYSTEM) -> QueueCollector:
    """The collect stage's part of queue system `name`."""
    return COLLECTORS.get(name)


def queue_collectors(names: Sequence[str]) -> QueueCollector:
    """One `QueueCollector` for every system in `names` (`settings.queues.systems`): the
    system's own when there is one, else their union (`collectors.queues._combined`)."""
    parts = [COLLECTORS.get(n) for n in names]
    if len(parts) == 1:
        return parts[0]
    from gpuledger.collectors.queues._combined import CombinedCollector

    return CombinedCollector(parts)
