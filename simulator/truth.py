"""Ground truth: card-hours per hour and device holder, straight from the schedule.

Rows are one per (UTC hour, slot, holder): a pod's allocation, or the slot standing free
(`allocation_state = 'unallocated'`), plus one row per hour for the part of a card no slot covers
(`'stranded'`: MIG compute slices no instance uses; `'unallocated'`: a vGPU card's uncut
fraction). Shares on a
card sum to one at every step, so `sum(card_hours)` is exactly GPUs x hours.

`idle_card_hours` counts the steps of a held slot inside a run of at least `min_steps` steps
below the activity threshold (`activity.idle_cover`) times the share; with field effects that
drop activity readings, "below" is judged on the readings the exporter emitted, carried by the
sampling model (`field_truth`), while card-hours stay the generator's. `active_ratio` is the
mean GR_ENGINE_ACTIVE the slot's series shows while held.

1. Per chunk, run-length encode each slot's row by (holder, hour) and sum steps, idle steps
   and activity per run (`segments`), so the month never sits in memory.
2. At the end, add runs of the same (hour, slot, holder) from neighbouring chunks, attach the
   slot and pod attributes, and append the stranded rows (`assemble`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpuledger.simulator.activity import Chunk
from gpuledger.simulator.hardware import Hardware
from gpuledger.simulator.tenants import Tenants
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.workloads import Schedule

CLASS_NAMES = ("training", "inference", "notebook", "batch_eval", "small_job")
TRUTH_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "ts": pl.Datetime("us", "UTC"),
    "uuid": pl.String, "gpu_i_id": pl.Int32, "vgpu": pl.String, "node": pl.String,
    "model": pl.String, "pool": pl.String, "sharing_mode": pl.String, "profile": pl.String,
    "namespace": pl.String, "pod": pl.String, "team": pl.String, "queue": pl.String,
    "workload_class": pl.String, "allocation_state": pl.String,
    "share": pl.Float64, "held_hours": pl.Float64, "card_hours": pl.Float64,
    "idle_card_hours": pl.Float64, "active_ratio": pl.Float64,
}


def segments(
    chunk: Chunk, idle: np.ndarray, tb: Timebase, c0: int, c1: int
) -> dict[str, np.ndarray]:
    """Run-length (slot, holder, hour) sums over chunk columns `[c0, c1)`."""
    holder = chunk.holder[:, c0:c1]
    valid = chunk.valid[:, c0:c1]
    width = c1 - c0
    k = chunk.e0 + np.arange(c0, c1)
    hour = (tb.origin_s + k * tb.step_s) // 3600
    h_local = hour - hour[0]
    n_hours = int(h_local[-1]) + 1
    code = np.where(valid, (holder + 1) * n_hours + h_local[None, :], -1).ravel()
    change = np.empty(code.size, dtype=bool)
    change[0] = True
    change[1:] = code[1:] != code[:-1]
    change[::width] = True
    seg = np.cumsum(change) - 1
    first = np.flatnonzero(change)
    steps = np.bincount(seg)
    idle_steps = np.bincount(seg, weights=idle[:, c0:c1].ravel())
    act_sum = np.bincount(seg, weights=chunk.shown[:, c0:c1].ravel() * (holder >= 0).ravel())
    seg_code = code[first]
    keep = seg_code >= 0
    return {
        "hour": (seg_code[keep] % n_hours + hour[0]).astype(np.int64),
        "slot": (first[keep] // width).astype(np.int64),
        "alloc": (seg_code[keep] // n_hours - 1).astype(np.int64),
        "steps": steps[keep].astype(np.int64),
        "idle_steps": idle_steps[keep],
        "act_sum": act_sum[keep],
    }


def assemble(
    parts: list[dict[str, np.ndarray]], hw: Hardware, sched: Schedule, tenants: Tenants,
    tb: Timebase,
) -> pl.DataFrame:
    step_h = tb.step_s / 3600
    if parts:
        raw = pl.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
    else:
        raw = pl.DataFrame(schema={"hour": pl.Int64, "slot": pl.Int64, "alloc": pl.Int64,
                                   "steps": pl.Int64, "idle_steps": pl.Float64, "act_sum": pl.Float64})
    runs = raw.group_by(["hour", "slot", "alloc"]).agg(pl.sum("steps", "idle_steps", "act_sum"))
    slots = _slot_table(hw)
    pods = _pod_table(sched, tenants)
    alloc_pod = pl.DataFrame({"alloc": np.arange(len(sched.alloc_pod)), "pod_id": sched.alloc_pod})
    held = runs.join(slots, on="slot", how="left").join(alloc_pod, on="alloc", how="left").join(
        pods, on="pod_id", how="left"
    )
    held = held.with_columns(
        pl.when(pl.col("alloc") >= 0).then(pl.lit("allocated")).otherwise(pl.lit("unallocated"))
        .alias("allocation_state"),
        (pl.col("steps") * step_h).alias("held_hours"),
        (pl.col("idle_steps") * step_h * pl.col("share")).alias("idle_card_hours"),
        pl.when(pl.col("alloc") >= 0).then(pl.col("act_sum") / pl.col("steps"))
        .otherwise(None).alias("active_ratio"),
    )
    frame = pl.concat([_finish(held, step_h), _stranded(hw, tb)], how="vertical_relaxed")
    return frame.sort(["ts", "uuid", "gpu_i_id", "vgpu", "pod"], nulls_last=True).select(
        [pl.col(c).cast(t) for c, t in TRUTH_SCHEMA.items()]
    )


def _finish(frame: pl.DataFrame, step_h: float) -> pl.DataFrame:
    return frame.with_columns(
        pl.from_epoch(pl.col("hour") * 3600, time_unit="s").dt.replace_time_zone("UTC").alias("ts"),
        (pl.col("held_hours") * pl.col("share")).alias("card_hours"),
    ).select(list(TRUTH_SCHEMA))


def _slot_table(hw: Hardware) -> pl.DataFrame:
    return pl.DataFrame({
        "slot": np.arange(len(hw.slots)),
        "uuid": [hw.gpus[s.gpu].uuid for s in hw.slots],
        "gpu_i_id": [s.gi_id for s in hw.slots],
        "vgpu": [s.vgpu for s in hw.slots],
        "node": [hw.nodes[hw.gpus[s.gpu].node].name for s in hw.slots],
        "model": [hw.gpus[s.gpu].model for s in hw.slots],
        "pool": [hw.pools[hw.gpus[s.gpu].pool].name for s in hw.slots],
        "sharing_mode": [hw.gpus[s.gpu].sharing for s in hw.slots],
        "profile": [s.profile for s in hw.slots],
        "share": [s.share for s in hw.slots],
    }, schema_overrides={"vgpu": pl.String, "profile": pl.String})


def _pod_table(sched: Schedule, tenants: Tenants) -> pl.DataFrame:
    pods = sched.pods
    return pl.DataFrame({
        "pod_id": np.arange(len(pods)),
        "namespace": [tenants.namespaces[i].name for i in pods.namespace],
        "pod": pods.name,
        "team": [tenants.namespaces[i].team for i in pods.namespace],
        "queue": pods.queue,
        "workload_class": [CLASS_NAMES[c] for c in pods.cls],
    }, schema_overrides={"team": pl.String, "queue": pl.String})


def _stranded(hw: Hardware, tb: Timebase) -> pl.DataFrame:
    """Per hour, the share of each card no slot covers, for the steps it was uncovered."""
    rows: dict[str, list[object]] = {c: [] for c in TRUTH_SCHEMA}
    step_h = tb.step_s / 3600
    for st in hw.stranded:
        gpu = hw.gpus[st.gpu]
        k = np.arange(st.start, st.end)
        hours, counts = np.unique((tb.origin_s + k * tb.step_s) // 3600, return_counts=True)
        n = hours.size
        held = counts * step_h
        for col, value in (
            ("uuid", gpu.uuid), ("gpu_i_id", -1), ("vgpu", None), ("node", hw.nodes[gpu.node].name),
            ("model", gpu.model), ("pool", hw.pools[gpu.pool].name), ("sharing_mode", gpu.sharing),
            ("profile", None), ("namespace", None), ("pod", None), ("team", None), ("queue", None),
            ("workload_class", None), ("allocation_state", st.state), ("share", st.share),
            ("idle_card_hours", 0.0), ("active_ratio", None),
        ):
            rows[col].extend([value] * n)
        rows["ts"].extend((hours * 3_600_000_000).tolist())
        rows["held_hours"].extend(held.tolist())
        rows["card_hours"].extend((held * st.share).tolist())
    frame = pl.DataFrame(rows, schema={**TRUTH_SCHEMA, "ts": pl.Int64})
    return frame.with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
