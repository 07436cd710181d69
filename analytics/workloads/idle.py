"""The largest idle allocations: who held a card without using it, and what that cost.

Built on the bill (so the idle card-hours and their cost are exactly the bill's): the bill's
detail rows are summed per allocation (holder on a device) over the window and ranked by idle
cost; `idle_workloads` sums those per workload (Deployment, StatefulSet, Job, notebook) or per
pod, so a Deployment's replicas and a multi-GPU pod's cards are one row. Where raw samples
still exist, `idle_runs_frame` lists the individual idle runs (start, end, length, whether
framebuffer memory stayed in use).
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.sampling.results import idle_runs
from gpuledger.analytics.workloads.requested import attach_workloads, filter_scope
from gpuledger.core.config import Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.core.steady import steady
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

ALLOCATION_KEYS: tuple[str, ...] = (
    "team", "namespace", "pod", "queue", "node", "pool", "model", "sharing_mode", "uuid",
    "gpu_i_id", "vgpu", "profile",
)


def idle_allocations(bill: Bill) -> pl.DataFrame:
    """Per allocation: card-hours, idle and held-idle card-hours, idle share and idle cost
    (only allocations with idle time)."""
    return held_allocations(bill).filter(pl.col("idle_card_hours") > 0)


def held_allocations(bill: Bill) -> pl.DataFrame:
    """`idle_allocations` before the idle filter: every allocation, busy ones included (what
    `idle_workloads` sums, so a multi-GPU pod counts all its cards). The sums made `steady`
    before the ratios and the order are taken: polars sums a group's rows in no set order, and
    an idle figure at a boundary (116.25 idle GPU-h) read 116.2 on one run and 116.3 on the
    next; the order is total (every allocation key after the figures), so equal rows never swap."""
    sums = steady(bill.allocated().group_by(list(ALLOCATION_KEYS)).agg(
        pl.col("card_hours").sum(),
        pl.col("idle_card_hours").sum(),
        pl.col("held_idle_card_hours").sum(),
        pl.col("idle_cost").sum(),
        pl.col("cost").sum(),
        pl.col("day").min().alias("first_day"),
        pl.col("day").max().alias("last_day"),
    ).collect())
    return sums.with_columns(
        (pl.col("idle_card_hours") / pl.col("card_hours")).fill_nan(0.0).alias("idle_fraction"),
        (pl.col("held_idle_card_hours") > 0.5 * pl.col("idle_card_hours")).alias("held_idle"),
    ).sort(["idle_cost", "idle_card_hours", *ALLOCATION_KEYS],
           descending=[True, True, *(False for _ in ALLOCATION_KEYS)], nulls_last=True)


def idle_workloads(
    allocations: pl.DataFrame, workloads: pl.DataFrame | None = None, *, team: str | None = None,
    namespace: str | None = None,
) -> pl.DataFrame:
    """`held_allocations` summed per workload: one row per Deployment, StatefulSet, Job or
    notebook (`analytics.workloads.requested.pod_workloads`), or per pod when `workloads` is None (a
    multi-GPU pod is one row either way: its devices are summed, `gpus` counts them); only
    workloads with idle time."""
    frame = filter_scope(allocations, team, namespace)
    if workloads is None:
        frame = frame.with_columns(pl.lit("Pod").alias("workload_kind"), pl.col("pod").alias("workload"))
    else:
        frame = attach_workloads(frame, workloads)
    device = pl.concat_str([pl.col("uuid"), pl.col("gpu_i_id").cast(pl.String).fill_null(""),
                            pl.col("vgpu").fill_null("")], separator="/")
    return (
        frame.with_columns(device.alias("_device"))
        .group_by("team", "namespace", "workload_kind", "workload")
        .agg(
            pl.col("pod").n_unique().alias("pods"),
            pl.col("_device").n_unique().alias("gpus"),
            pl.col("model").unique().sort().str.join(",").alias("model"),
            pl.col("sharing_mode").unique().sort().str.join(",").alias("sharing_mode"),
            pl.col("card_hours").sum(), pl.col("idle_card_hours").sum(),
            pl.col("held_idle_card_hours").sum(), pl.col("idle_cost").sum(), pl.col("cost").sum(),
            pl.col("first_day").min(), pl.col("last_day").max(),
        )
        .with_columns(
            (pl.col("idle_card_hours") / pl.col("card_hours")).fill_nan(0.0).alias("idle_fraction"),
            (pl.col("held_idle_card_hours") > 0.5 * pl.col("idle_card_hours")).alias("held_idle"),
        )
        .filter(pl.col("idle_card_hours") > 0)
        .sort(["idle_cost", "idle_card_hours", "namespace", "workload"],
              descending=[True, True, False, False])
    )


def top_idle(
    wh: Warehouse, window: Window, settings: Settings, top: int = 20, bill: Bill | None = None
) -> pl.DataFrame:
    """The `top` allocations by idle cost in `window` (reuses `bill` when given)."""
    bill = bill or compute_bill(wh, window, settings, ("team",))
    return idle_allocations(bill).head(top)


def idle_runs_frame(wh: Warehouse, window: Window, settings: Settings) -> pl.DataFrame:
    """Each idle run of at least `idle.min_minutes` from raw samples, longest first."""
    runs = idle_runs(wh, window, SamplingRules.of(settings))
    return runs.with_columns(
        ((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds() / 60).alias("minutes")
    ).sort(["run_hours", "uuid", "start_ts"], descending=[True, False, False])
