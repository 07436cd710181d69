"""Priority as a bill dimension: `--by priority_class` on the bill, idle and the team page.

A pod's PriorityClass is stored apart from table `pods` (`pod_priorities`, see
`core.frames_preemption`), so it is joined onto the bill's detail by (namespace, pod) after
pricing, only when asked for: prices, shares and conservation are computed exactly as without
it, and a bill not split by priority reads nothing more. Rows held by a pod whose class is
unknown or unset show `(none)`; rows without a pod (unallocated capacity, the discount line)
have no class.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpuledger.analytics.billing.preemption import NO_CLASS
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.volcano import pod_keys, pod_priority_classes

DIMENSION = "priority_class"


ROLLUP_BASE = ("namespace", "model", "pool", "sharing_mode")
"""What every bill from the roll-up groups by: teams come from namespaces, prices from models."""


def rollup_keys(dims: Sequence[str], known: Sequence[str]) -> list[str]:
    """The roll-up keys (of `known`) a bill by `dims` needs: `ROLLUP_BASE`, the dims, and the
    pod's when split by class (to join the class)."""
    wanted = [*ROLLUP_BASE, *dims, *(("pod",) if DIMENSION in dims else ())]
    return list(dict.fromkeys(d for d in wanted if d in known))


def with_priority_class(wh: Warehouse, detail: pl.DataFrame, dims: Sequence[str]) -> pl.DataFrame:
    """`detail` with a `priority_class` column when `dims` asks for it (else unchanged)."""
    if DIMENSION not in dims:
        return detail
    classes = pod_priority_classes(wh).select("namespace", "pod", "priority_class")
    joined = detail.join(classes, on=["namespace", "pod"], how="left")
    known = pl.col("priority_class").fill_null("").replace("", NO_CLASS)
    return joined.with_columns(
        pl.when(pl.col("pod").is_not_null()).then(known).otherwise(None).alias(DIMENSION))


def class_workloads(wh: Warehouse) -> pl.DataFrame:
    """namespace, pod → workload_kind `PriorityClass`, workload = the pod's class (`(none)`
    when unknown or unset): the owners frame `analytics.workloads.idle.idle_workloads` groups by, so
    `idle --by priority_class` is the per-workload idle summed by class, row for row."""
    pods = pod_keys(wh)
    classes = pod_priority_classes(wh).select("namespace", "pod", "priority_class")
    joined = pods.join(classes, on=["namespace", "pod"], how="left")
    return joined.select(
        "namespace", "pod", pl.lit("PriorityClass").alias("workload_kind"),
        pl.col("priority_class").fill_null("").replace("", NO_CLASS).alias("workload"))


def idle_by(wh: Warehouse, detail: pl.DataFrame, by: Sequence[str] = ("team", DIMENSION)) -> pl.DataFrame:
    """Idle time of the allocations in a bill's `detail`, summed by `by` (`idle --by
    priority_class`): card-hours, idle card-hours, idle cost, idle share; most idle cost first."""
    held = with_priority_class(wh, detail.filter(pl.col("kind") == "allocated"), by)
    keys = list(by)
    return held.group_by(keys).agg(
        pl.col("card_hours").sum(), pl.col("idle_card_hours").sum(), pl.col("idle_cost").sum(),
    ).with_columns(
        (pl.col("idle_card_hours") / pl.col("card_hours")).fill_nan(0.0).alias("idle_fraction"),
    ).sort(["idle_cost", *keys], descending=[True, *[False] * len(keys)], nulls_last=True)
