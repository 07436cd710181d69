"""The catalog search scores each candidate catalog over every workload at once (issue 34: the
256-GPU month called `smallest_in` half a million times), and its evidence is summed the same
way (the 1,000-GPU month's 110,000 workloads took 1.2 s one by one); the chosen catalogs and
their evidence equal the search and the evidence that looked up every workload, frozen here as
`_score_each` (main at f62d17e) and `_evidence_each` (main at da742b4), each workload's
right-sized profile found by `smallest_in` over the model's candidates, on seeded demand of
three models and thousands of workloads with repeated and distinct needs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.advice import profile_catalog
from gpuledger.analytics.advice.profile_catalog import DEMAND_SCHEMA, choose_catalog, slice_cost, smallest_in

MODELS = ("A100-80GB", "A100-SXM4-40GB", "H100-80GB")


Pairs = list[tuple[dict[str, Any], str]]


def _pairs_each(demand: pl.DataFrame) -> dict[str, Pairs]:
    """Per model, each workload that some candidate fits, with its right-sized profile."""
    out: dict[str, Pairs] = {}
    for r in demand.sort("model", "workload").iter_rows(named=True):
        model = r["model"]
        right = smallest_in(model, profile_catalog.candidates(model), r["need_memory_mib"], r["need_compute"])
        if right != profile_catalog.WHOLE:
            out.setdefault(model, []).append((r, right))
    return out


def _score_each(pairs: dict[str, Pairs]) -> Callable[..., tuple[float, ...]]:
    def score(model: str, combo: Sequence[str], work: profile_catalog.Work, max_rounding: float) -> tuple[float, ...]:
        count, hours, waste = 0, 0.0, 0.0
        for r, right in pairs[model]:
            assigned = smallest_in(model, combo, float(r["need_memory_mib"]), int(r["need_compute"]))
            bound = (1 + max_rounding) * slice_cost(model, right) + 1e-9
            if assigned != profile_catalog.WHOLE and slice_cost(model, assigned) <= bound:
                count += 1
                hours += float(r["gpu_hours"])
                waste += (slice_cost(model, assigned) - slice_cost(model, right)) * float(r["gpu_hours"])
        return (count, round(hours, 6), -round(waste, 6), -len(combo))
    return score


def _evidence_each(pairs: dict[str, Pairs]) -> Callable[..., profile_catalog.Catalog]:
    def evidence(model: str, chosen: tuple[str, ...], work: profile_catalog.Work, *, max_rounding: float,
                 mig_factor: float, basis: str) -> profile_catalog.Catalog:
        covered, hours, covered_hours, waste = 0, 0.0, 0.0, 0.0
        cost_catalog = cost_free = cost_now = 0.0
        uncovered: list[dict[str, object]] = []
        billed = profile_catalog.billed_share
        for r, right in pairs[model]:
            h, price = float(r["gpu_hours"]), float(r["unit_price"] or 0.0)
            assigned = smallest_in(model, chosen, float(r["need_memory_mib"]), int(r["need_compute"]))
            hours += h
            cost_now += float(r["current_cost"] or 0.0)
            cost_free += h * price * billed(model, right, basis) * mig_factor
            factor = 1.0 if assigned == profile_catalog.WHOLE else mig_factor
            cost_catalog += h * price * billed(model, assigned, basis) * factor
            bound = (1 + max_rounding) * slice_cost(model, right) + 1e-9
            if assigned != profile_catalog.WHOLE and slice_cost(model, assigned) <= bound:
                covered += 1
                covered_hours += h
                waste += (slice_cost(model, assigned) - slice_cost(model, right)) * h
            else:
                uncovered.append({"workload": r["workload"], "needs": right, "nearest_in_catalog": assigned,
                                  "gpu_hours": round(h, 3)})
        return profile_catalog.Catalog(model, chosen, len(pairs[model]), covered, hours, covered_hours, waste,
                                       cost_catalog, cost_free, cost_now, tuple(uncovered))
    return evidence


def _demand(n: int = 3000, seed: int = 11) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = [4000.0, 9000.0, 15000.0, 19000.0, 30000.0, 38000.0, 70000.0]  # repeated needs
    rows = []
    for i in range(n):
        memory = float(sizes[rng.integers(len(sizes))]) if i % 3 else float(rng.uniform(1000, 75000))
        rows.append((MODELS[i % 3], f"w-{i:05d}", memory, int(rng.integers(1, 7)), float(rng.uniform(0.5, 700)),
                     2.5, float(rng.uniform(1, 2000))))
    return pl.DataFrame(rows, schema=DEMAND_SCHEMA, orient="row")


@pytest.mark.parametrize(("k", "rounding"), [(1, 1.0), (3, 1.0), (2, 0.5)])
def test_the_search_equals_looking_up_every_workload(monkeypatch: pytest.MonkeyPatch, k: int,
                                                     rounding: float) -> None:
    demand = _demand()
    new = choose_catalog(demand, k=k, max_rounding=rounding, mig_factor=0.9)
    pairs = _pairs_each(demand)
    monkeypatch.setattr(profile_catalog, "_score", _score_each(pairs))
    monkeypatch.setattr(profile_catalog, "_evidence", _evidence_each(pairs))
    old = choose_catalog(demand, k=k, max_rounding=rounding, mig_factor=0.9)
    assert [c.model for c in new] == list(MODELS)
    assert all(c.profiles and c.covered > 0 for c in new)
    assert k == 3 or any(c.covered < c.workloads for c in new)  # a real trade-off to find
    assert new == old
