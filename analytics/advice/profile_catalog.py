"""A standard MIG profile catalog per GPU model: at most K profiles that cover most workloads.

Pooled-GPU teams report that two or three standard profiles should serve at least 80% of
workloads: every extra profile fragments the fleet (a node laid out for one mix strands slices
for another). The catalog trades a little rounding waste for that.

1. Demand: each workload's right-sized need (memory with headroom, compute slices) by the one
   sizing rule, `analytics.workloads.recommend.size_workload`, with its held GPU-hours. Workloads that
   need a whole card are not MIG demand and are left out of the coverage base.
2. Candidates: the model's profiles without media extensions and below 7 compute slices.
   A profile fits a workload when its memory and compute slices hold the need; the workload's
   right-sized profile is the smallest that fits (the unconstrained choice).
3. Physical cost of a profile = max(compute/7, memory/8), the slices it takes from a card.
   A workload is covered by a catalog when the smallest catalog profile that fits costs at
   most (1 + max_rounding) x its right-sized profile.
4. Every subset of 1..K candidates is scored (at most C(6,3) per model: exhaustive, exact) by
   covered workloads, then covered GPU-hours, then least rounding waste (extra slice-hours),
   then fewer profiles; the best wins.
5. Money (billing basis of the settings): catalog cost = each workload on its smallest
   fitting catalog profile (a whole card when none fits) x price x MIG discount; against the
   unconstrained cost (right-sized) and against what the workloads pay now. The monthly
   saving is now - catalog, scaled to 730 h.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import polars as pl

from gpuledger.analytics.devices.shares import planned_share, raw_mig_share
from gpuledger.analytics.workloads.requested import device_memory_mib
from gpuledger.core.mig import COMPUTE_SLICES, catalog

WHOLE = "whole"
DEMAND_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.String, "workload": pl.String, "need_memory_mib": pl.Float64,
    "need_compute": pl.Int64, "gpu_hours": pl.Float64, "unit_price": pl.Float64,
    "current_cost": pl.Float64,
}
"""One row per workload: `current_cost` is what it paid in the window (money)."""


@dataclass(frozen=True)
class Catalog:
    """The chosen catalog of one model, with its evidence."""

    model: str
    profiles: tuple[str, ...]
    workloads: int
    covered: int
    gpu_hours: float
    covered_gpu_hours: float
    waste_slice_hours: float
    cost_catalog: float
    cost_unconstrained: float
    cost_now: float
    uncovered: tuple[dict[str, object], ...]
    """Per uncovered workload: its right-sized profile (`needs`) and the catalog's nearest fit."""

    @property
    def coverage(self) -> float:
        return self.covered / self.workloads if self.workloads else 1.0

    @property
    def coverage_gpu_hours(self) -> float:
        return self.covered_gpu_hours / self.gpu_hours if self.gpu_hours else 1.0

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model, "profiles": list(self.profiles), "workloads": self.workloads,
            "covered": self.covered, "coverage": round(self.coverage, 4),
            "coverage_gpu_hours": round(self.coverage_gpu_hours, 4),
            "waste_slice_hours": round(self.waste_slice_hours, 3),
            "cost_catalog": round(self.cost_catalog, 2),
            "cost_unconstrained": round(self.cost_unconstrained, 2),
            "cost_now": round(self.cost_now, 2), "uncovered": list(self.uncovered),
        }


def candidates(model: str) -> tuple[str, ...]:
    """Step 2: the profiles a catalog may hold, smallest first."""
    known = catalog()[model]
    usable = [p for p in known.profiles.values() if not p.media_extensions and p.compute < COMPUTE_SLICES]
    return tuple(p.name for p in sorted(usable, key=lambda p: (p.compute, p.memory, p.name)))


@cache
def slice_cost(model: str, profile: str) -> float:
    """Step 3: the share of a card a profile takes physically. Cached: a pure function of the
    MIG catalog (loaded once), called 2.8 million times by a 256-GPU month's search
    (bench/results/scale_profile_before.json) for a few dozen distinct arguments."""
    return 1.0 if profile == WHOLE else raw_mig_share(model, profile, "max_normalized")


def _fits(model: str, profile: str, memory: float, compute: int) -> bool:
    p = catalog()[model].profiles[profile]
    return (device_memory_mib(model, profile, None) or 0.0) >= memory and p.compute >= compute


def smallest_in(model: str, profiles: Sequence[str], memory: float, compute: int) -> str:
    """The cheapest of `profiles` that fits, or `whole`."""
    fitting = [p for p in profiles if _fits(model, p, memory, compute)]
    return min(fitting, key=lambda p: (slice_cost(model, p), p)) if fitting else WHOLE


def choose_catalog(
    demand: pl.DataFrame, *, k: int = 3, max_rounding: float = 1.0, mig_factor: float = 1.0,
    basis: str = "compute",
) -> list[Catalog]:
    """Steps 2-5 for every model in `demand` (DEMAND_SCHEMA), models in name order."""
    out = []
    for (model,), group in demand.sort("model", "workload").group_by("model", maintain_order=True):
        if str(model) in catalog():
            out.append(_model_catalog(str(model), group, k=k, max_rounding=max_rounding,
                                      mig_factor=mig_factor, basis=basis))
    return out


def _model_catalog(
    model: str, rows: pl.DataFrame, *, k: int, max_rounding: float, mig_factor: float, basis: str,
) -> Catalog:
    names = candidates(model)
    work = Work.of(model, names, rows)
    best: tuple[tuple[float, ...], tuple[str, ...]] | None = None
    for size in range(1, min(k, len(names)) + 1):
        for combo in itertools.combinations(names, size):
            score = _score(model, combo, work, max_rounding)
            if best is None or score > best[0]:
                best = (score, combo)
    chosen = best[1] if best else ()
    return _evidence(model, chosen, work.pairs, max_rounding=max_rounding, mig_factor=mig_factor, basis=basis)


@dataclass(frozen=True)
class Work:
    """One model's MIG demand, each workload with its right-sized profile (`pairs`), and what
    step 4 reads of each, worked out once for every candidate
    catalog: which candidates fit it, as bits in `order` (the candidates cheapest first, so
    the cheapest fitting catalog profile, `smallest_in`'s choice, is the lowest bit a catalog
    shares), its right-sized profile's place in `order`, and its GPU-hours."""

    pairs: list[tuple[dict[str, Any], str]]
    order: tuple[str, ...]
    fits: np.ndarray
    right: np.ndarray
    hours: np.ndarray
    cost: np.ndarray
    """`slice_cost` of each profile of `order`."""

    @classmethod
    def of(cls, model: str, names: Sequence[str], rows: pl.DataFrame) -> Work:
        """The demand `rows` of `model` over the candidates `names`. A workload's right-sized
        profile is the lowest bit of the candidates that fit it (step 2: the smallest that fits,
        `smallest_in`'s choice); one that none fits needs a whole card and is left out (step 1)."""
        order = tuple(sorted(names, key=lambda p: (slice_cost(model, p), p)))
        masks: dict[tuple[float, int], int] = {}
        pairs, fits, right = [], [], []
        for r in rows.iter_rows(named=True):
            need = (float(r["need_memory_mib"]), int(r["need_compute"]))
            if need not in masks:
                masks[need] = sum(1 << i for i, p in enumerate(order) if _fits(model, p, *need))
            if mask := masks[need]:
                lowest = (mask & -mask).bit_length() - 1
                pairs.append((r, order[lowest]))
                fits.append(mask)
                right.append(lowest)
        return cls(pairs, order, np.array(fits, dtype=np.int64), np.array(right, dtype=np.int64),
                   np.array([float(r["gpu_hours"]) for r, _ in pairs], dtype=np.float64),
                   np.array([slice_cost(model, p) for p in order], dtype=np.float64))


def _score(model: str, combo: Sequence[str], work: Work, max_rounding: float) -> tuple[float, ...]:
    """Step 4's order as one tuple (bigger is better), over every workload at once: the
    catalog profile a workload lands on is the lowest bit its fitting candidates share with
    the catalog; coverage compares slice costs exactly as `_covered` does, and the hours and
    the waste are summed one by one in the workloads' order (a cumulative sum), as a loop
    over them sums (tests/advice/test_profile_catalog_search.py)."""
    mask = sum(1 << work.order.index(p) for p in combo)
    shared = work.fits & mask
    landed = shared != 0
    lowest = np.log2(np.where(landed, shared & -shared, 1)).astype(np.int64)
    cost, right = work.cost[lowest], work.cost[work.right]
    covered = landed & (cost <= (1 + max_rounding) * right + 1e-9)
    hours = work.hours[covered]
    waste = (cost[covered] - right[covered]) * hours
    return (int(covered.sum()), round(_in_order(hours), 6), -round(_in_order(waste), 6), -len(combo))


def _covered(model: str, assigned: str, right: str, max_rounding: float) -> bool:
    bound = (1 + max_rounding) * slice_cost(model, right) + 1e-9
    return assigned != WHOLE and slice_cost(model, assigned) <= bound


def _in_order(values: np.ndarray) -> float:
    """The sum of `values` added one by one from the first (NumPy's `sum` adds pairwise)."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def billed_share(model: str, profile: str, basis: str) -> float:
    """The billing share of a profile under the bill's `basis`, as a planner prices it
    (`analytics.devices.shares.planned_share`, the rule `analytics.workloads.recommend` prices
    a right-sizing by)."""
    if profile == WHOLE:
        return 1.0
    return planned_share(model, profile, basis)


def _evidence(
    model: str, chosen: tuple[str, ...], work: Sequence[tuple[dict[str, Any], str]], *,
    max_rounding: float, mig_factor: float, basis: str,
) -> Catalog:
    covered, hours, covered_hours, waste = 0, 0.0, 0.0, 0.0
    cost_catalog = cost_free = cost_now = 0.0
    uncovered: list[dict[str, object]] = []
    for r, right in work:
        h, price = float(r["gpu_hours"]), float(r["unit_price"] or 0.0)
        assigned = smallest_in(model, chosen, float(r["need_memory_mib"]), int(r["need_compute"]))
        hours += h
        cost_now += float(r["current_cost"] or 0.0)
        cost_free += h * price * billed_share(model, right, basis) * mig_factor
        factor = 1.0 if assigned == WHOLE else mig_factor
        cost_catalog += h * price * billed_share(model, assigned, basis) * factor
        if _covered(model, assigned, right, max_rounding):
            covered += 1
            covered_hours += h
            waste += (slice_cost(model, assigned) - slice_cost(model, right)) * h
        else:
            uncovered.append({"workload": r["workload"], "needs": right, "nearest_in_catalog": assigned,
                              "gpu_hours": round(h, 3)})
    return Catalog(model, chosen, len(work), covered, hours, covered_hours, waste,
                   cost_catalog, cost_free, cost_now, tuple(uncovered))


def round_to_catalog(
    model: str, counts: Mapping[str, int], profiles: Sequence[str],
) -> tuple[dict[str, int], int]:
    """Profile counts (e.g. right-sized demand for the MIG optimizer) rounded up onto the
    catalog: each instance moves to the cheapest catalog profile that holds its memory and
    compute. Returns (catalog counts, instances that need a whole card instead)."""
    known = catalog()[model]
    out: dict[str, int] = {}
    whole = 0
    for name, n in counts.items():
        p = known.profile(name)
        target = smallest_in(model, profiles, float(device_memory_mib(model, name, None) or 0.0), p.compute)
        if target == WHOLE:
            whole += n
        else:
            out[target] = out.get(target, 0) + n
    return dict(sorted(out.items())), whole
