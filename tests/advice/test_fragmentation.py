"""Fragmentation and off-peak rebuilds: a node that must cross the threshold.

Cases (A100-SXM4-40GB; free slices are compute slices; rates worked by hand):
- one card per layout: {3g, 1g} with 2g.10gb demanded leaves 3 free compute slices, one 2g
  fits, 1 is unusable; an empty card with 1g demanded holds seven 1g (0 unusable); an empty
  card with 2g demanded holds three 2g (1 of 7 unusable: 2g cannot tile 7);
- node `n-frag` goes from empty (2 of 14 = 0.14) to two {3g, 1g} cards (2 of 6 unusable,
  0.33 >= 0.3, 6 of 14 slices free >= 0.25): a rebuild is scheduled into the next Saturday
  01:00-05:00 Europe/Berlin window (00:00-04:00 UTC in December), with the window's past load;
- `n-ok` ({2g, 1g}: 2g at 0, 1g at 6, two 2g at 2 and 4: 0 of 4) and `n-low` (a lone 1g, 2g
  demanded: two 2g at 0 and 2 (4 of 6 compute), 2 unusable: 0.33 but only if enough is free);
- pool rates are the node sums; `inside_window` is the apply guard.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.analytics.advice.fragmentation import (
    CardFragments,
    card_fragments,
    fragmentation_rates,
    inside_window,
    next_window,
    pool_rates,
    rebuilds,
)
from gpuledger.core.config_advice import MaintenanceWindow

M = "A100-SXM4-40GB"
T0 = datetime(2026, 11, 30, tzinfo=UTC)
T1 = T0 + timedelta(days=1)
WINDOWS = (MaintenanceWindow(pool="mig-*", weekly=("sat 01:00-05:00",), timezone="Europe/Berlin"),)


def test_card_fragments_by_hand() -> None:
    assert card_fragments(M, {"3g.20gb": 1, "1g.5gb": 1}, "2g.10gb") == CardFragments(3, 1)
    assert card_fragments(M, {}, "1g.5gb") == CardFragments(7, 0)
    assert card_fragments(M, {}, "2g.10gb") == CardFragments(7, 1)
    assert card_fragments(M, {"2g.10gb": 1, "1g.5gb": 1}, "2g.10gb") == CardFragments(4, 0)
    assert card_fragments(M, {"3g.20gb": 2}, "1g.5gb") == CardFragments(1, 1)  # no memory left


def _layouts() -> pl.DataFrame:
    rows = [
        (T0, "mig-a", "n-frag", "u1", M, None, 0), (T0, "mig-a", "n-frag", "u2", M, None, 0),
        (T1, "mig-a", "n-frag", "u1", M, "3g.20gb", 1), (T1, "mig-a", "n-frag", "u1", M, "1g.5gb", 1),
        (T1, "mig-a", "n-frag", "u2", M, "3g.20gb", 1), (T1, "mig-a", "n-frag", "u2", M, "1g.5gb", 1),
        (T1, "mig-a", "n-ok", "u3", M, "2g.10gb", 1), (T1, "mig-a", "n-ok", "u3", M, "1g.5gb", 1),
        (T1, "mig-b", "n-low", "u4", M, "3g.20gb", 1), (T1, "mig-b", "n-low", "u4", M, "2g.10gb", 1),
        (T1, "mig-b", "n-low", "u4", M, "1g.5gb", 1),
    ]
    return pl.DataFrame(rows, schema={"ts": pl.Datetime("us", "UTC"), "pool": pl.String, "node": pl.String,
                                      "uuid": pl.String, "model": pl.String, "profile": pl.String,
                                      "n": pl.Int64}, orient="row")


SMALLEST = {M: "2g.10gb"}


def test_node_and_pool_rates_over_time() -> None:
    rates = fragmentation_rates(_layouts(), SMALLEST)
    by = {(r["ts"], r["node"]): r for r in rates.iter_rows(named=True)}
    assert by[(T0, "n-frag")]["rate"] == pytest.approx(2 / 14) and by[(T0, "n-frag")]["free_slices"] == 14
    assert (by[(T1, "n-frag")]["free_slices"], by[(T1, "n-frag")]["unusable_slices"]) == (6, 2)
    assert by[(T1, "n-frag")]["rate"] == pytest.approx(1 / 3)
    assert by[(T1, "n-ok")]["rate"] == 0.0
    assert (by[(T1, "n-low")]["free_slices"], by[(T1, "n-low")]["rate"]) == (1, 1.0)
    pools = {r["pool"]: r for r in pool_rates(rates).filter(pl.col("ts") == T1).iter_rows(named=True)}
    assert (pools["mig-a"]["free_slices"], pools["mig-a"]["unusable_slices"]) == (6 + 4, 2 + 0)
    assert pools["mig-a"]["rate"] == pytest.approx(2 / 10)


def test_fragmented_node_is_scheduled_into_its_next_window() -> None:
    rates = fragmentation_rates(_layouts(), {M: "2g.10gb"})
    now = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # a Wednesday
    hours = [T0 + timedelta(hours=h) for h in range(14 * 24)]
    activity = pl.DataFrame({
        "ts": hours, "node": ["n-frag"] * len(hours),
        "activity": [0.1 if (t.weekday() == 5 and t.hour < 4) else 0.7 for t in hours],
    })
    found = rebuilds(rates, threshold=0.3, min_free=0.25, now=now, windows=WINDOWS, activity=activity)
    assert [r.node for r in found] == ["n-frag"]
    r = found[0]
    assert r.window == (datetime(2026, 12, 5, 0, 0, tzinfo=UTC), datetime(2026, 12, 5, 4, 0, tzinfo=UTC))
    assert r.window_load == pytest.approx(0.1)
    assert r.overall_load is not None and r.overall_load > 0.6
    assert r.free_share == pytest.approx(6 / 14)
    assert (r.unusable_slices, r.free_slices) == (2, 6)  # not priced: the MIG plan prices (0230)
    assert "next window Sat 2026-12-05 00:00-04:00 UTC" in r.reason()
    assert "(2 of 6)" in r.reason() and "gpuledger optimize mig" in r.reason()


def test_threshold_and_free_capacity_gate_a_rebuild() -> None:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    # with 1g demanded nothing is stranded: {3g,1g} leaves 3 memory slices and 3 compute
    assert rebuilds(fragmentation_rates(_layouts(), {M: "1g.5gb"}), threshold=0.3, min_free=0.25,
                    now=now, windows=WINDOWS) == []
    rates = fragmentation_rates(_layouts(), SMALLEST)
    assert [r.node for r in rebuilds(rates, threshold=0.3, min_free=0.1, now=now, windows=())] == [
        "n-frag", "n-low"]
    assert [r.node for r in rebuilds(rates, threshold=0.34, min_free=0.1, now=now, windows=())] == ["n-low"]
    assert rebuilds(rates, threshold=0.3, min_free=0.5, now=now, windows=()) == []


def test_inside_window_guard_and_wrapping_ranges() -> None:
    assert inside_window(datetime(2026, 12, 5, 0, 30, tzinfo=UTC), WINDOWS)
    assert not inside_window(datetime(2026, 12, 5, 4, 0, tzinfo=UTC), WINDOWS)
    late = (MaintenanceWindow(weekly=("sun 23:00-01:00",)),)
    assert next_window(datetime(2026, 12, 7, 0, 30, tzinfo=UTC), late) == (
        datetime(2026, 12, 6, 23, 0, tzinfo=UTC), datetime(2026, 12, 7, 1, 0, tzinfo=UTC))
    assert inside_window(datetime(2026, 12, 7, 0, 30, tzinfo=UTC), late)
