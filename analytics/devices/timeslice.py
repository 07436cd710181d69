"""Time-sliced cards (`timeslice`): each replica is 1 / replicas of the card.

A holder's `replica_count` is 1 per replica seen in the samples, or its spread over the node's
cards when the holders come from the pods (`analytics.devices.unlabeled`).
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import ReplicaSplitCard


class TimeSlice(ReplicaSplitCard):
    """`timeslice`: replica_count / replicas of the card (node label, else inventory, else seen)."""

    mode = "timeslice"

    def share(self) -> pl.Expr:
        return pl.col("replica_count") / pl.col("_replicas").clip(lower_bound=1.0)
