"""A standard MIG profile catalog per GPU model: at most K profiles that cover most workloads.

Pooled-GPU teams report that two or three standard profiles should serve at least 80% of
workloads: every extra profile fragments the fleet (a node laid out for one mix strands slices
for another). The catalog trades a little rounding waste for that.

1. Demand: each workload's right-sized need (memory with headroom, compute slices) by the one
   sizing rule, `analytics.workloads.recommend.sized`, with its held GPU-hours. Workloads that
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

import numpy as np
import polars as pl

from gpuledger.analytics.devices.shares import WHOLE, billed_share, raw_mig_share
from gpuledger.analytics.workloads.requested import device_memory_mib
from gpuledger.core.mig import COMPUTE_SLICES, catalog

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
    return _evidence(model, chosen, work, max_rounding=max_rounding, mig_factor=mig_factor, basis=basis)


@dataclass(frozen=True)
class Work:
    """One model's MIG demand: the workloads some candidate fits (`rows`, in the demand's
    order; one that none fits needs a whole card and is left out, step 1), and what steps 4 and
    5 read of each, worked out once for every candidate catalog: which candidates fit it, as
    bits in `order` (the candidates cheapest first, so the cheapest fitting catalog profile,
    `smallest_in`'s choice, is the lowest bit a catalog shares), its right-sized profile's
    place in `order` (the lowest bit of all: step 2's smallest that fits), and its GPU-hours."""

    rows: pl.DataFrame
    order: tuple[str, ...]
    fits: np.ndarray
    right: np.ndarray
    hours: np.ndarray
    cost: np.ndarray
    """`slice_cost` of each profile of `order`."""

    @classmethod
    def of(cls, model: str, names: Sequence[str], rows: pl.DataFrame) -> Work:
        """The demand `rows` of `model` over the candidates `names`: the fitting candidates
        found once per distinct need (memory, compute slices), not per workload."""
        order = tuple(sorted(names, key=lambda p: (slice_cost(model, p), p)))
        needs = rows.select("need_memory_mib", "need_compute").unique(maintain_order=True)
        masks = [sum(1 << i for i, p in enumerate(order) if _fits(model, p, memory, compute))
                 for memory, compute in needs.iter_rows()]
        fitting = rows.join(needs.with_columns(pl.Series("_fits", masks, pl.Int64)),
                            on=["need_memory_mib", "need_compute"], how="left", maintain_order="left")
        fitting = fitting.filter(pl.col("_fits") != 0)
        fits = fitting["_fits"].to_numpy()
        return cls(fitting.drop("_fits"), order, fits, _lowest_bit(fits),
                   fitting["gpu_hours"].to_numpy().astype(np.float64),
                   np.array([slice_cost(model, p) for p in order], dtype=np.float64))


def _lowest_bit(masks: np.ndarray) -> np.ndarray:
    """The place of each mask's lowest set bit (0 for an empty mask)."""
    return np.log2(np.where(masks != 0, masks & -masks, 1)).astype(np.int64)


@dataclass(frozen=True)
class _Landing:
    """Where each workload of a `Work` lands on one catalog: `landed` where some catalog profile
    fits it, `place` that profile's place in `order` (the lowest bit its fitting candidates
    share with the catalog: `smallest_in`'s choice), `covered` where that costs at most
    (1 + max_rounding) x its right-sized profile (step 3), `waste` the extra slices then."""

    landed: np.ndarray
    place: np.ndarray
    covered: np.ndarray
    waste: np.ndarray

    @classmethod
    def of(cls, work: Work, catalog: Sequence[str], max_rounding: float) -> _Landing:
        shared = work.fits & sum(1 << work.order.index(p) for p in catalog)
        place = _lowest_bit(shared)
        cost, right = work.cost[place], work.cost[work.right]
        covered = (shared != 0) & (cost <= (1 + max_rounding) * right + 1e-9)
        return cls(shared != 0, place, covered, cost - right)


def _score(model: str, combo: Sequence[str], work: Work, max_rounding: float) -> tuple[float, ...]:
    """Step 4's order as one tuple (bigger is better), over every workload at once
    (`_Landing`); the hours and the waste are summed one by one in the workloads' order (a
    cumulative sum), as a loop over them sums (tests/advice/test_profile_catalog_search.py)."""
    at = _Landing.of(work, combo, max_rounding)
    hours, waste = work.hours[at.covered], at.waste[at.covered] * work.hours[at.covered]
    return (int(at.covered.sum()), round(_in_order(hours), 6), -round(_in_order(waste), 6), -len(combo))


def _in_order(values: np.ndarray) -> float:
    """The sum of `values` added one by one from the first (NumPy's `sum` adds pairwise)."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def _evidence(
    model: str, chosen: tuple[str, ...], work: Work, *, max_rounding: float, mig_factor: float, basis: str,
) -> Catalog:
    """Step 5 and the chosen catalog's coverage, over every workload at once: each lands on the
    lowest bit its fitting candidates share with `chosen` (a whole card when none), priced by
    `billed_share`; every total summed in the workloads' order, as a loop over them sums
    (`_in_order`; tests/advice/test_profile_catalog_search.py holds it equal to that loop)."""
    at = _Landing.of(work, chosen, max_rounding)
    billed = np.array([billed_share(model, p, basis) for p in work.order], dtype=np.float64)
    h = work.hours
    price = work.rows["unit_price"].fill_null(0.0).to_numpy().astype(np.float64)
    on_catalog = np.where(at.landed, billed[at.place], billed_share(model, WHOLE, basis))
    cost_catalog = h * price * on_catalog * np.where(at.landed, mig_factor, 1.0)
    cost_free = h * price * billed[work.right] * mig_factor
    now = work.rows["current_cost"].fill_null(0.0).to_numpy().astype(np.float64)
    missed = np.flatnonzero(~at.covered)
    uncovered = tuple(
        {"workload": workload, "needs": work.order[work.right[i]],
         "nearest_in_catalog": work.order[at.place[i]] if at.landed[i] else WHOLE,
         "gpu_hours": round(float(h[i]), 3)}
        for i, workload in zip(missed, work.rows["workload"].gather(missed), strict=True))
    covered = at.covered
    return Catalog(model, chosen, len(h), int(covered.sum()), _in_order(h), _in_order(h[covered]),
                   _in_order(at.waste[covered] * h[covered]), _in_order(cost_catalog), _in_order(cost_free),
                   _in_order(now), uncovered)


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
