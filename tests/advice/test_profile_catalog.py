"""Standard profile catalog: seeded demand with a catalog that must be found.

Cases (A100-SXM4-40GB, slice costs by hand: 1g.5gb 1/7, 1g.10gb 2/8, 2g.10gb 2/7, 3g.20gb 4/8,
4g.20gb 4/7):
- K=2 finds {1g.5gb, 3g.20gb}: all 12 MIG workloads covered (the 2g one rounds to 3g at 1.75x,
  inside the 2x rounding bound), the whole-card workload is outside the coverage base.
- K=1 finds {2g.10gb}: the six 1g workloads at exactly 2x and the 2g one, 7 of 12.
- costs against a hand computation; the uncovered list names what each would need.
- rounding right-sized counts onto a catalog (the optimizer's catalog-only demand).
"""

from __future__ import annotations

import polars as pl
import pytest

from gpuledger.analytics.advice.profile_catalog import DEMAND_SCHEMA, choose_catalog, round_to_catalog

MODEL = "A100-SXM4-40GB"


def _demand() -> pl.DataFrame:
    rows = []
    for i in range(6):
        rows.append((MODEL, f"small-{i}", 4000.0, 1, 10.0, 1.3, 13.0))
    for i in range(5):
        rows.append((MODEL, f"mid-{i}", 15000.0, 3, 20.0, 1.3, 26.0))
    rows.append((MODEL, "two-g", 9000.0, 2, 30.0, 1.3, 39.0))
    rows.append((MODEL, "big", 30000.0, 5, 40.0, 1.3, 52.0))
    return pl.DataFrame(rows, schema=DEMAND_SCHEMA, orient="row")


def test_two_profile_catalog_found_and_covers_everything() -> None:
    (cat,) = choose_catalog(_demand(), k=2, max_rounding=1.0, mig_factor=0.9)
    assert cat.profiles == ("1g.5gb", "3g.20gb")
    assert (cat.workloads, cat.covered) == (12, 12)
    assert cat.coverage == 1.0 and cat.coverage_gpu_hours == 1.0
    # waste: the 2g workload on 3g: (4/8 - 2/7) x 30 h
    assert cat.waste_slice_hours == pytest.approx((0.5 - 2 / 7) * 30)
    # money on the compute basis, MIG discount 0.9
    hand_catalog = 1.3 * 0.9 * (6 * 10 / 7 + 5 * 20 * 3 / 7 + 30 * 3 / 7)
    hand_free = 1.3 * 0.9 * (6 * 10 / 7 + 5 * 20 * 3 / 7 + 30 * 2 / 7)
    assert cat.cost_catalog == pytest.approx(hand_catalog)
    assert cat.cost_unconstrained == pytest.approx(hand_free)
    assert cat.cost_now == pytest.approx(6 * 13 + 5 * 26 + 39)


def test_one_profile_catalog_and_its_uncovered_workloads() -> None:
    (cat,) = choose_catalog(_demand(), k=1, max_rounding=1.0)
    assert cat.profiles == ("2g.10gb",)
    assert cat.covered == 7 and cat.coverage == pytest.approx(7 / 12)
    assert cat.coverage_gpu_hours == pytest.approx((60 + 30) / (60 + 100 + 30))
    needs = {u["workload"]: (u["needs"], u["nearest_in_catalog"]) for u in cat.uncovered}
    assert needs == {f"mid-{i}": ("3g.20gb", "whole") for i in range(5)}


def test_tighter_rounding_changes_the_answer() -> None:
    """At 1.5x rounding the 1g workloads cannot sit on 2g: K=2 keeps 1g and 3g, and 2g.10gb
    (3g at 1.75x) is no longer covered."""
    (cat,) = choose_catalog(_demand(), k=2, max_rounding=0.5)
    assert cat.profiles == ("1g.5gb", "3g.20gb")
    assert cat.covered == 11
    assert [u["workload"] for u in cat.uncovered] == ["two-g"]


def test_round_counts_onto_catalog() -> None:
    counts, whole = round_to_catalog(MODEL, {"1g.5gb": 3, "2g.10gb": 2, "4g.20gb": 1}, ("1g.5gb", "3g.20gb"))
    assert counts == {"1g.5gb": 3, "3g.20gb": 2}
    assert whole == 1


def test_optimizer_demand_onto_catalog() -> None:
    """`optimizer.mig.observed.recommended_demand(catalog_only=...)` rounds with this rule."""
    from collections import Counter

    from gpuledger.optimizer.mig.observed import _onto_catalog

    counts = {MODEL: Counter({"1g.5gb": 2, "2g.10gb": 1, "4g.20gb": 1}), "H100-80GB": Counter({"1g.10gb": 1})}
    whole: Counter[str] = Counter({MODEL: 1})
    _onto_catalog(counts, whole, {MODEL: ("2g.10gb",)})
    assert counts[MODEL] == Counter({"2g.10gb": 3}) and whole[MODEL] == 2
    assert counts["H100-80GB"] == Counter({"1g.10gb": 1})  # no catalog: unchanged
