"""Field-mode idle truth: the idle rule applied to the activity readings the exporter emitted.

Issue 13 asks for the field mode's ground truth "computed from the same sampling model". With
effects that drop or alter activity readings (`field.READING_EFFECTS`), a minute the generator
knows was idle can have no reading, or another one: its exporter missed the scrape, the
GR_ENGINE_ACTIVE series had a gap, the value was NaN or -1, an old exporter reports only
GPU_UTIL (rounded to a percent), an exporter restart left a hole. Nobody reading that
telemetry can know what the card did then; the documented model (docs/decisions/0051, DESIGN.md
"The sampling model") says what such a minute counts as, and so the truth applies that rule to
the rows `field_telemetry.Damage.apply` keeps: the very rows the renderer writes, so the two
can never disagree. Written here in numpy from the rule's text, never from analytics' SQL.

Per slot and step (a slot is one device; its holder is the pod's (namespace, name)):
1. Readings from the kept rows: GR_ENGINE_ACTIVE and GPU_UTIL, each a reading only when
   finite and not negative (NaN, -1 and a missing field are no reading).
2. At a row: each field carries its last reading of the same holder within `STALENESS_S`
   (rows at most that far back, this one included); activity is GR_ENGINE_ACTIVE, else
   GPU_UTIL / 100; neither gives "unknown".
3. A step with no row (missed scrape, restart hole) is covered by the device's previous row
   when that is at most the gap tolerance back and of the same holder: it shows that row's
   activity; otherwise it is unknown. (The model measures the tolerance between the rows
   around a gap; field gaps last minutes, far below the default hour, so the two agree.)
4. Unknown is neither idle nor busy: it ends an idle run. It is returned as +inf, which no
   threshold exceeds, so `activity.idle_cover` applies the rest of the rule unchanged.
Card-hours never depend on this (holding a card does not depend on its readings).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from gpuledger.core.config import IdleSettings
from gpuledger.simulator.activity import Chunk, SlotArrays
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.workloads import Schedule

STALENESS_S = 300
"""How long a field's last reading stands for later rows that miss it: Prometheus' default
lookback delta (`--query.lookback-delta`, 5 minutes), the bound the sampling model uses."""
GAP_TOLERANCE_S = float(IdleSettings.model_fields["gap_tolerance_s"].default)
"""How far back a row covers the steps without rows after it: the default
`idle.gap_tolerance_s`, the setting the field harness bills with."""


def context_steps(tb: Timebase) -> int:
    """Steps before a chunk needed to know its first step's activity (step 3, then step 2)."""
    return math.ceil(GAP_TOLERANCE_S / tb.step_s) + STALENESS_S // tb.step_s


def holder_keys(sched: Schedule) -> np.ndarray:
    """Per allocation, a number for its pod's (namespace, name): how a holder is known in
    telemetry (a StatefulSet pod recreated under the same name is the same holder)."""
    pods = sched.pods
    index: dict[tuple[int, str], int] = {}
    pod_key = np.array([index.setdefault((ns, name), len(index))
                        for ns, name in zip(pods.namespace, pods.name, strict=True)], dtype=np.int64)
    return pod_key[sched.alloc_pod]


def _readings(values: pl.Series) -> np.ndarray:
    raw = values.cast(pl.Float64).to_numpy()
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(raw) & (raw >= 0), raw, np.nan)


def _each_hami_slot(slot: np.ndarray, rows: np.ndarray, arrays: SlotArrays) -> tuple[np.ndarray, np.ndarray]:
    """(slot, row) pairs with each HAMi card row (its card's first slot) repeated for every slot
    of the card: the card's readings stand for each of its holders."""
    hami = arrays.mode[slot] == 3
    if not hami.any():
        return slot, rows
    card = arrays.gpu[slot[hami]]
    first = arrays.gpu_first[card]
    ends = np.append(arrays.gpu_first[1:], len(arrays.gpu))[card]
    counts = ends - first
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return (np.concatenate([slot[~hami], np.repeat(first, counts) + offsets]),
            np.concatenate([rows[~hami], np.repeat(rows[hami], counts)]))


def emitted_activity(
    chunk: Chunk, kept: pl.DataFrame, arrays: SlotArrays, alloc_key: np.ndarray, tb: Timebase
) -> np.ndarray:
    """What the idle rule reads per (slot, step) of `chunk`: the carried activity reading of
    the kept rows `kept` (`Damage.apply` of the chunk's `gpu_samples` with ids), +inf where
    unknown (numbered steps in the module docstring)."""
    n, width = chunk.holder.shape
    key = np.where(chunk.holder >= 0, alloc_key[np.maximum(chunk.holder, 0)], -1)
    # 1. The device's rows: every row of a whole card or MIG instance, the held replicas of
    #    a time-sliced card (its unlabeled free-card series is another device), and a HAMi
    #    card's one row for each of its slots (the holder's rows, `analytics.sampling.holders`).
    slot = kept["_slot"].to_numpy()
    mode = arrays.mode[slot]
    rows = np.flatnonzero((mode < 2) | (kept["_pod"].to_numpy() >= 0) | (mode == 3))
    slot, rows = _each_hami_slot(slot[rows], rows, arrays)
    col = (kept["ts"].dt.epoch("s").to_numpy()[rows] - tb.origin_s) // tb.step_s - chunk.e0
    present = np.zeros((n, width), dtype=bool)
    present[slot, col] = True
    fields = []
    for column in ("gr_engine_active", "gpu_util"):
        values = np.full((n, width), np.nan)
        values[slot, col] = _readings(kept[column])[rows]
        fields.append(values)
    # 2. Carry each field within the staleness bound, the nearest row last (it wins).
    carried = [np.full((n, width), np.nan) for _ in fields]
    for d in range(min(STALENESS_S // tb.step_s, width - 1), -1, -1):
        same = present[:, : width - d] & (key[:, : width - d] == key[:, d:])
        for values, out in zip(fields, carried, strict=True):
            src = values[:, : width - d]
            out[:, d:] = np.where(same & ~np.isnan(src), src, out[:, d:])
    gr, util = carried
    at_row = np.where(~np.isnan(gr), gr, util / 100.0)
    at_row[~present] = np.nan
    # 3. Steps without a row take the previous row's activity (same holder, within tolerance).
    steps = np.arange(width)
    last = np.maximum.accumulate(np.where(present, steps[None, :], -1), axis=1)
    prev = np.maximum(last, 0)
    rows = np.arange(n)[:, None]
    covered = (last >= 0) & ((steps[None, :] - last) * tb.step_s <= GAP_TOLERANCE_S)
    covered &= key[rows, prev] == key
    act = np.where(covered, at_row[rows, prev], np.nan)
    # 4. Unknown never reads as idle (and so ends an idle run).
    return np.where(np.isnan(act), np.inf, act)
