"""Overcommit advice: a seeded time-sliced pool past its knee, and one that can pack more.

Cases:
- inference pool `ts-a`, tokens/s per card by replicas 1:100, 2:180, 3:230, 4:235, 5:232
  (steps +80, +50, +5, -3; the knee gain is 10% of one holder = 10 tok/s): knee 3, recommended
  1:3, the pool runs 5 per card most of the time, so it is flagged past the knee, no saving.
- training pool `ts-b` on activity only (no tokens), 1:0.5, 2:0.9, 3:0.92: knee 2, the class
  ceiling 2; it runs 1 per card: packing to 2 frees half its card-hours (hand figure).
- a level seen for fewer than `min_minutes` minutes does not count.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.analytics.advice.overcommit import SAMPLE_SCHEMA, knee_of, overcommit_advice

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def _rows(pool: str, klass: str, levels: dict[int, tuple[int, float, float | None]], price: float) -> list[tuple]:
    rows, minute = [], 0
    for holders, (minutes, activity, tokens) in levels.items():
        for _ in range(minutes):
            rows.append((pool, klass, f"{pool}-gpu0", T0 + timedelta(minutes=minute), holders, activity, tokens, price))
            minute += 1
    return rows


def _samples() -> pl.DataFrame:
    a = _rows("ts-a", "inference", {1: (60, 0.4, 100.0), 2: (60, 0.7, 180.0), 3: (60, 0.9, 230.0),
                                     4: (60, 0.95, 235.0), 5: (600, 0.97, 232.0), 6: (10, 0.99, 500.0)}, 3.0)
    b = _rows("ts-b", "training", {1: (600, 0.5, None), 2: (60, 0.9, None), 3: (60, 0.92, None)}, 2.0)
    return pl.DataFrame(a + b, schema=SAMPLE_SCHEMA, orient="row")


def test_knee_by_hand() -> None:
    assert knee_of([1, 2, 3, 4, 5], [100, 180, 230, 235, 232], 0.1) == 3
    assert knee_of([1, 3], [100, 130], 0.1) == 3  # +30 over two replicas >= 2 x 10


def test_pool_past_its_knee_is_flagged() -> None:
    by_pool = {a.pool: a for a in overcommit_advice(
        _samples(), ceilings={"inference": 4, "training": 2}, knee_gain=0.1, min_minutes=30, window_hours=24)}
    a = by_pool["ts-a"]
    assert a.metric == "tokens/s"
    assert [int(c["holders"]) for c in a.curve] == [1, 2, 3, 4, 5]  # level 6 (10 min) dropped
    assert (a.knee, a.recommended) == (3, 3)
    running = (60 * 1 + 60 * 2 + 60 * 3 + 60 * 4 + 600 * 5 + 10 * 6) / 850
    assert a.running == pytest.approx(running)
    assert a.past_knee and a.monthly_saving == 0.0


def test_under_packed_training_pool_saves_cards() -> None:
    b = {a.pool: a for a in overcommit_advice(
        _samples(), ceilings={"inference": 4, "training": 2}, knee_gain=0.1, min_minutes=30,
        window_hours=24)}["ts-b"]
    assert b.metric == "activity"
    assert (b.knee, b.recommended) == (2, 2)  # +0.4 then +0.02 < 0.05
    running = (600 * 1 + 60 * 2 + 60 * 3) / 720
    assert b.running == pytest.approx(running)
    assert not b.past_knee
    assert b.monthly_saving == pytest.approx(12.0 * (1 - running / 2) * 2.0 * 730 / 24)
