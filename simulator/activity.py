"""Per-chunk state of every slot: who holds it, how busy it is, how much memory is used.

One `Chunk` is a set of (slot x step) matrices for steps `[e0, e1)`. Activity is a pure
function of (pod, allocation, step) through counter-based noise, so any chunking gives the
same numbers. Per workload class (t = absolute time, blocks of 30 minutes):
- training: `level` ± noise, except stalled blocks (probability `p2`) near zero;
- inference: `level` x a daily load curve (trough at 03:00 UTC, peak at 15:00); services
  with a low level go idle at night;
- notebook: active blocks with probability `p2`, otherwise idle (hours at a time);
- batch evaluation: `level` ± noise; small jobs: `level` ± noise with idle blocks (`p2`);
- every pod spends its first 10 minutes loading (near zero).

What a device *shows* (GR_ENGINE_ACTIVE on its series) is its own activity for whole cards and
MIG instances, and the card's activity for time-slice and vGPU slots (DCGM cannot split a
shared card): time-sliced pods add up to at most 1, vGPU pods count by their declared share.
Idle is judged on what the device shows, like an analyst reading the metrics would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuledger.simulator.hardware import Hardware
from gpuledger.simulator.noise import uniform
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.workloads import BATCH_EVAL, INFERENCE, NOTEBOOK, SMALL_JOB, TRAINING, Schedule

MODE_CODE = {"exclusive": 0, "mig": 1, "timeslice": 2, "vgpu": 3}
BLOCK_S = 1800
LOADING_S = 600
DAY_S = 86400


def load_curve(t_abs: np.ndarray) -> np.ndarray:
    """Daily inference load in [0.1, 1]: trough at 03:00 UTC, peak at 15:00 UTC."""
    tod = (t_abs % DAY_S) / DAY_S
    return 0.1 + 0.9 * (1 - np.cos(2 * np.pi * (tod - 0.125))) / 2


def load_integral(t_abs: np.ndarray) -> np.ndarray:
    """Antiderivative of `load_curve` in seconds (token counters are its differences)."""
    return 0.55 * t_abs - 0.45 * DAY_S / (2 * np.pi) * np.sin(2 * np.pi * (t_abs / DAY_S - 0.125))


@dataclass(frozen=True)
class SlotArrays:
    """Static per-slot and per-card arrays (slots are ordered by card)."""

    gpu: np.ndarray
    mode: np.ndarray
    share: np.ndarray
    memory: np.ndarray
    start: np.ndarray
    end: np.ndarray
    weight: np.ndarray
    gpu_first: np.ndarray
    gpu_node: np.ndarray
    gi_id: np.ndarray

    @classmethod
    def of(cls, hw: Hardware) -> SlotArrays:
        gpu = np.array([s.gpu for s in hw.slots], dtype=np.int64)
        mode = np.array([MODE_CODE[hw.gpus[s.gpu].sharing] for s in hw.slots], dtype=np.int8)
        share = np.array([s.share for s in hw.slots])
        weight = np.where((mode == 1) | (mode == 3), share, 1.0)
        first = np.searchsorted(gpu, np.arange(len(hw.gpus)))
        if np.any(np.diff(gpu) < 0) or len(np.unique(gpu)) != len(hw.gpus):
            raise AssertionError("slots must be ordered by card and every card needs a slot")
        return cls(
            gpu=gpu, mode=mode, share=share,
            memory=np.array([s.memory_mib for s in hw.slots], dtype=np.float64),
            start=np.array([s.start for s in hw.slots], dtype=np.int64),
            end=np.array([s.end for s in hw.slots], dtype=np.int64),
            weight=weight, gpu_first=first,
            gpu_node=np.array([g.node for g in hw.gpus], dtype=np.int64),
            gi_id=np.array([s.gi_id for s in hw.slots], dtype=np.int32),
        )


@dataclass
class Chunk:
    """Matrices over slots x steps `[e0, e1)`; `gpu_*` are cards x steps."""

    e0: int
    e1: int
    holder: np.ndarray
    """Allocation id holding the slot, -1 when free."""
    valid: np.ndarray
    """The slot exists (MIG instances come and go with reconfigurations)."""
    own: np.ndarray
    """The holder's own activity (0 when free)."""
    shown: np.ndarray
    """GR_ENGINE_ACTIVE as the slot's series shows it."""
    gpu_act: np.ndarray
    mem_used: np.ndarray
    gpu_mem: np.ndarray


def compute_chunk(
    sched: Schedule, arrays: SlotArrays, tb: Timebase, seed: int, *, e0: int, e1: int
) -> Chunk:
    """Fill the matrices for steps `[e0, e1)` (numbered steps below)."""
    n_slots, width = len(arrays.gpu), e1 - e0
    steps = np.arange(e0, e1, dtype=np.int64)
    # 1. Holders: paint each overlapping allocation onto its slot's row.
    holder = np.full((n_slots, width), -1, dtype=np.int64)
    live = np.nonzero((sched.alloc_start < e1) & (sched.alloc_end > e0))[0]
    for a in live:
        lo = max(int(sched.alloc_start[a]), e0) - e0
        hi = min(int(sched.alloc_end[a]), e1) - e0
        holder[sched.alloc_slot[a], lo:hi] = a
    valid = (arrays.start[:, None] <= steps[None, :]) & (steps[None, :] < arrays.end[:, None])
    # 2. Own activity of each held cell, by class.
    flat = np.flatnonzero(holder >= 0)
    own = np.zeros((n_slots, width))
    mem_used = np.zeros((n_slots, width))
    if flat.size:
        alloc = holder.ravel()[flat]
        pod = sched.alloc_pod[alloc]
        k = steps[flat % width]
        own.ravel()[flat] = _activity(sched, tb, seed, alloc=alloc, pod=pod, k=k)
        slot = flat // width
        mem_used.ravel()[flat] = np.round(sched.pod_mem[pod] * arrays.memory[slot])
    # 3. What cards show: sum over their slots (weighted), capped at a full card.
    gpu_act = np.minimum(np.add.reduceat(own * arrays.weight[:, None], arrays.gpu_first, axis=0), 1.0)
    gpu_mem = np.add.reduceat(mem_used, arrays.gpu_first, axis=0)
    shared = arrays.mode >= 2
    shown = own.copy()
    shown[shared] = gpu_act[arrays.gpu[shared]]
    return Chunk(e0, e1, holder, valid, own, shown, gpu_act, mem_used, gpu_mem)


def _activity(
    sched: Schedule, tb: Timebase, seed: int, *, alloc: np.ndarray, pod: np.ndarray, k: np.ndarray
) -> np.ndarray:
    t_abs = tb.origin_s + k * tb.step_s
    cls = sched.pod_cls[pod]
    level = sched.pod_level[pod]
    p2 = sched.pod_p2[pod]
    u_n = uniform(seed, 1, alloc, k)
    u_b = uniform(seed, 2, pod, t_abs // BLOCK_S)
    act = np.select(
        [cls == TRAINING, cls == INFERENCE, cls == NOTEBOOK, cls == BATCH_EVAL, cls == SMALL_JOB],
        [
            np.where(u_b < p2, 0.005 + 0.02 * u_n, level + 0.1 * (u_n - 0.5)),
            level * load_curve(t_abs) + 0.02 * (u_n - 0.5),
            np.where(u_b < p2, level + 0.2 * (u_n - 0.5), 0.03 * u_n),
            level + 0.1 * (u_n - 0.5),
            np.where(u_b < p2, 0.02 * u_n, level + 0.2 * (u_n - 0.5)),
        ],
    )
    loading = (k - sched.pod_start[pod]) * tb.step_s < LOADING_S
    act = np.where(loading, 0.01 + 0.02 * u_n, act)
    return np.clip(act, 0.0, 1.0)


def idle_cover(chunk: Chunk, threshold: float, min_steps: int) -> np.ndarray:
    """Cells inside a run of >= `min_steps` held-and-below-threshold steps of one holder.

    A cell is idle when some window of `min_steps` consecutive steps containing it is idle
    throughout and held by the same allocation; this needs only `min_steps - 1` steps of
    context on each side, which `compute_chunk` is asked for.
    """
    held = chunk.holder >= 0
    idle = held & (chunk.shown < threshold)
    n, width = idle.shape
    if width < min_steps:
        return np.zeros_like(idle)
    csum = np.zeros((n, width + 1), dtype=np.int32)
    np.cumsum(idle, axis=1, out=csum[:, 1:])
    full = (csum[:, min_steps:] - csum[:, :-min_steps]) == min_steps
    full &= chunk.holder[:, : width - min_steps + 1] == chunk.holder[:, min_steps - 1:]
    wsum = np.zeros((n, full.shape[1] + 1), dtype=np.int32)
    np.cumsum(full, axis=1, out=wsum[:, 1:])
    t = np.arange(width)
    hi = np.minimum(t, width - min_steps) + 1
    lo = np.maximum(0, t - min_steps + 1)
    covered: np.ndarray = (wsum[:, hi] - wsum[:, lo]) > 0
    return covered & idle
