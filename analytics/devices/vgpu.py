"""HAMi vGPU cards (`vgpu`): each holder pays for the fraction HAMi gave it on that card.

Holders come from HAMi's allocations (`analytics.sampling.holders`: the card HAMi placed the pod
on), never spread over a node's cards, so this source does not take its holders from the pods'
requests. The fraction is `analytics.devices.shares.vgpu_share_expr` (the larger of cores and
memory) of HAMi's allocation where one was published (`vgpu_allocations`: per card and pod, its
containers summed; the annotation and the scheduler's series agree, the annotation is read
first), else of the pod's requests; a pod that declared nothing pays 1 / replicas, like a
time-slice replica.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import ReplicaSplitCard, ShareInputs
from gpuledger.analytics.devices.shares import vgpu_share_expr
from gpuledger.warehouse.queries.hami import vgpu_allocations_between

_KEY = ["uuid", "namespace", "pod"]
_AMOUNTS = {"_alloc_cores": pl.Float64, "_alloc_mem": pl.Float64, "_alloc_card_mem": pl.Float64}


def allocation_amounts(allocations: pl.DataFrame) -> pl.DataFrame:
    """Per card and pod: HAMi's cores (%) and memory (MiB) summed over its containers (each
    container's amounts from its first source, `api` before `prometheus`), and HAMi's total
    memory of the card."""
    per_container = allocations.sort("source").group_by([*_KEY, "container_index"]).agg(
        pl.col("cores_pct").drop_nulls().first(), pl.col("mem_mib").drop_nulls().first(),
        pl.col("card_mem_mib").max(),
    )
    return per_container.group_by(_KEY).agg(
        _sum_known("cores_pct").alias("_alloc_cores"), _sum_known("mem_mib").alias("_alloc_mem"),
        pl.col("card_mem_mib").max().alias("_alloc_card_mem"),
    )


def _sum_known(column: str) -> pl.Expr:
    """The sum of a column's known values; NULL where none is known (not 0: unknown)."""
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum())


class VirtualGpu(ReplicaSplitCard):
    """`vgpu`: HAMi's allocated fraction (else the declared one, else 1 / replicas) x replica_count."""

    mode = "vgpu"
    holders_from_pods = False

    def prepare(self, frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
        frame = super().prepare(frame, inputs)
        if "_alloc_mem" in frame.columns:
            return frame
        window = inputs.window
        amounts = allocation_amounts(vgpu_allocations_between(inputs.wh, window.start, window.end))
        if amounts.is_empty():
            return frame.with_columns(*(pl.lit(None, t).alias(c) for c, t in _AMOUNTS.items()))
        return frame.join(amounts, on=_KEY, how="left", maintain_order="left").with_columns(
            pl.coalesce("_alloc_card_mem", pl.col("memory_mib").cast(pl.Float64)).alias("_alloc_card_mem"))

    def share(self) -> pl.Expr:
        even = 1.0 / pl.col("_replicas").clip(lower_bound=1.0)
        allocated = vgpu_share_expr("_alloc_cores", "_alloc_mem", None, "_alloc_card_mem")
        return pl.coalesce(allocated, vgpu_share_expr(), even) * pl.col("replica_count")
