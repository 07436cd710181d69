"""Several queue systems as one `QueueCollector` (Kueue and Volcano side by side).

Why: the Prometheus collector asks one `QueueCollector` for its queries and its frame. With
more than one system, each system's queries are sent under its own key (`<system>:<column>`)
and each builds its own `queue_samples` rows from its own answers; the rows are then stacked.
The systems name different queues (ClusterQueues, Volcano Queues), so their rows sit side by
side in the table (a name both use would be two rows per instant with different flavors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.collectors.prom_parse import REPLICA_LABELS

if TYPE_CHECKING:
    from gpuledger.collectors.chunks import Chunk
    from gpuledger.collectors.prom_parse import Matrix
    from gpuledger.collectors.quality import Quality
    from gpuledger.collectors.queues import QueueCollector, QueueResource


class CombinedCollector:
    """The union of `parts` (the first one's pod label comes first in `pod_queue_labels`)."""

    def __init__(self, parts: Sequence[QueueCollector]) -> None:
        self.parts = tuple(parts)
        self.name = "+".join(p.name for p in self.parts)
        self.resources = tuple(r for p in self.parts for r in p.resources)
        self.pod_queue_label = self.parts[0].pod_queue_label
        self.metric_labels = tuple(dict.fromkeys(label for p in self.parts for label in p.metric_labels))

    def row(self, resource: QueueResource, item: Mapping[str, Any], at: datetime) -> dict[str, Any]:
        owner = next(p for p in self.parts if resource in p.resources)
        return owner.row(resource, item, at)

    def metric_queries(self, step: timedelta, *, replica_labels: Sequence[str] = REPLICA_LABELS
                       ) -> dict[str, str]:
        return {f"{p.name}:{col}": q for p in self.parts
                for col, q in p.metric_queries(step, replica_labels=replica_labels).items()}

    def queue_samples(self, matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality,
                      *, replica_labels: Sequence[str] = REPLICA_LABELS) -> pl.DataFrame:
        frames = []
        for p in self.parts:
            mine = {k.split(":", 1)[1]: m for k, m in matrices.items() if k.startswith(f"{p.name}:")}
            frames.append(p.queue_samples(mine, chunk, now, quality, replica_labels=replica_labels))
        return pl.concat(frames, how="vertical").sort("ts", "cluster_queue", "flavor", "resource")
