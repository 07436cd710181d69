"""HAMi vGPU cards (`vgpu`): each holder pays for the fraction it declared.

The declared fraction is `analytics.devices.shares.vgpu_share_expr` (the larger of cores and memory);
a pod that declared nothing pays 1 / replicas, like a time-slice replica.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import ReplicaSplitCard
from gpuledger.analytics.devices.shares import vgpu_share_expr


class VirtualGpu(ReplicaSplitCard):
    """`vgpu`: declared fraction (else 1 / replicas) x replica_count."""

    mode = "vgpu"

    def share(self) -> pl.Expr:
        even = 1.0 / pl.col("_replicas").clip(lower_bound=1.0)
        return pl.coalesce(vgpu_share_expr(), even) * pl.col("replica_count")
