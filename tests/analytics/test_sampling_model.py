"""The sampling model (analytics.sampling.sweep, docs/decisions/0051) on hand-built samples.

Every case loads rows at the exact times a scrape produced them into a real warehouse file and
checks held, idle and active figures worked out by hand in the test (defaults: idle threshold
0.05, idle runs of at least 30 minutes, held idle from 1024 MiB, gap tolerance 1 h, H100 at
3.00 per card-hour).

Cases:
- jittered samples (±10 s around the minute): held time is first to last sample plus the
  card's own median spacing, all of it idle;
- a 3-minute and a 2-minute gap of the activity field only: the idle hour stays one run; a
  6-minute gap of it: the sixth minute is activity unknown and splits the run;
- alternating minutes with only activity or only memory: one idle, held-idle run;
- a holder with no activity field at all: held, never idle, `active_ratio` NULL in the
  hourly frame and in the day usage (activity unknown, not busy);
- NaN and negative activity values are not readings: the last reading carries over them;
- a pod restarted on the same card: two allocations, the idle run does not cross the restart;
- a scrape gap longer than the gap tolerance: the allocation ends, the last sample stands for
  the card's spacing, the gap is unallocated;
- two rows of one device at one time (HA replicas): counted once, their fields merged;
- step independence: the same warehouse billed with `prometheus.step` 30 s and 60 s gives the
  same bill to the cent;
- a card scraped every 5 minutes: its last sample stands for 5 minutes of capacity, not a
  fixed step;
- the hole rule (decision 0168): a holder change inside a scrape hole splits the hole (the
  time past the card's spacing) at its midpoint: pod a's last sample at minute 29, pod b's
  first at minute 34 on a card scraped every minute (4 minutes of hole) → a holds 0-32, b
  32-60; a hole of 20 minutes gives each side 5 minutes (the staleness bound) and the middle
  10 minutes to nobody (unallocated on the bill); one holder on both sides of a hole still
  holds all of it; a pod whose first sample comes 5 minutes after the free card's previous
  one is billed from the middle of the hole, not from its first sample; under the old rule
  (`card-next-scrape-v1`, still computable) the same rows give a 0-34 and b 34-60.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.sampling.results import allocation_runs, held_hourly, idle_runs
from gpuledger.analytics.usage.daily import Part, usage_of
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.core.rules import HOLE_RULE_V1, HOLE_RULE_V2, Rules, SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import T0, at, gpus, load, namespaces, window
from tests.analytics.conftest import assert_conserved, by_team

RULES = SamplingRules.of(Settings())
MINUTE = 60.0


def rows(
    uuid: str, seconds: Sequence[float], ns: str | None = "ml", pod: str | None = "p1",
    *, act: Any = 0.01, fb: Any = 20_000.0, util: Any = None,
) -> list[dict[str, Any]]:
    """Rows at `seconds` after T0; `act`/`fb`/`util` a value or one value per row."""
    def pick(value: Any, i: int) -> Any:
        return value[i] if isinstance(value, list) else value

    return [{
        "ts": T0 + timedelta(seconds=s), "node": "node-a", "uuid": uuid, "gpu_i_id": -1,
        "mig_profile": None, "vgpu": None, "namespace": ns, "pod": pod if ns else None,
        "container": "main" if ns else None, "gr_engine_active": pick(act, i), "sm_active": None,
        "gpu_util": pick(util, i), "fb_used_mib": pick(fb, i), "fb_free_mib": None,
        "power_w": None, "tensor_active": None, "dram_active": None, "gpu_temp_c": None,
    } for i, s in enumerate(seconds)]


def frame(*parts: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([r for p in parts for r in p], schema=polars_schema(TABLES["gpu_samples"]))


def minutes(n: int, start: int = 0) -> list[float]:
    return [(start + k) * MINUTE for k in range(n)]


def warehouse(tmp_path: Path, win: Window, samples: pl.DataFrame, **more: pl.DataFrame) -> Path:
    frames = {"gpus": gpus({"uuid": "GPU-1"}), "gpu_samples": samples,
              "namespaces": namespaces({"ml": "vision"}), **more}
    return load(tmp_path / "wh.duckdb", win, frames)


def held(path: Path, win: Window) -> pl.DataFrame:
    with Warehouse.open(path, read_only=True) as wh:
        return held_hourly(wh, win, RULES)


def hours(frame: pl.DataFrame, column: str) -> float:
    return float(frame[column].sum())


def test_jittered_samples(tmp_path):
    # Every fifth sample 10 s late, every fifth (offset by two) 10 s early: the spacings are
    # 60, 70, 50, 50, 70 repeating, whose median is 60 s.
    jitter = [10.0 if k % 5 == 2 else -10.0 if k % 5 == 4 else 0.0 for k in range(120)]
    times = [k * MINUTE + j for k, j in enumerate(jitter)]
    spacing = statistics.median_low([b - a for a, b in itertools.pairwise(times)])
    assert spacing == 60.0
    win = window(3)
    frame_ = held(warehouse(tmp_path, win, frame(rows("GPU-1", times))), win)
    expected = (times[-1] - times[0] + spacing) / 3600
    assert expected == pytest.approx((119 * 60 - 10 + 60) / 3600)  # the last sample is 10 s early
    assert hours(frame_, "held_hours") == pytest.approx(expected)
    assert hours(frame_, "idle_hours") == pytest.approx(expected)
    assert frame_["active_ratio"].to_list() == pytest.approx([0.01, 0.01])


def test_gap_of_one_field_keeps_the_idle_run(tmp_path):
    # 60 idle minutes; activity missing at minutes 20-22 and 40-41, memory always present.
    act: list[float | None] = [0.01] * 60
    for m in (20, 21, 22, 40, 41):
        act[m] = None
    win = window(1)
    frame_ = held(warehouse(tmp_path, win, frame(rows("GPU-1", minutes(60), act=act))), win)
    assert hours(frame_, "held_hours") == pytest.approx(1.0)
    assert hours(frame_, "idle_hours") == pytest.approx(1.0)
    assert hours(frame_, "held_idle_hours") == pytest.approx(1.0)


def test_field_gap_beyond_the_staleness_bound_is_unknown(tmp_path):
    # Activity missing at minutes 20-25: minutes 20-24 are within 5 min of the reading at
    # minute 19, minute 25 is not: unknown, so idle runs 0-24 (25 min, too short) and
    # 26-59 (34 min, idle).
    act: list[float | None] = [0.01] * 60
    for m in range(20, 26):
        act[m] = None
    win = window(1)
    path = warehouse(tmp_path, win, frame(rows("GPU-1", minutes(60), act=act)))
    frame_ = held(path, win)
    assert hours(frame_, "held_hours") == pytest.approx(1.0)
    assert hours(frame_, "idle_hours") == pytest.approx(34 / 60)
    with Warehouse.open(path, read_only=True) as wh:
        runs = idle_runs(wh, win, RULES)
    assert runs.height == 1
    assert runs["start_ts"][0] == at(minutes=26)


def test_alternating_memory_and_activity_minutes(tmp_path):
    # Even minutes: activity 0.0 only; odd minutes: 5000 MiB only. One idle run, held idle.
    act = [0.0 if m % 2 == 0 else None for m in range(60)]
    fb = [None if m % 2 == 0 else 5000.0 for m in range(60)]
    win = window(1)
    frame_ = held(warehouse(tmp_path, win, frame(rows("GPU-1", minutes(60), act=act, fb=fb))), win)
    assert hours(frame_, "idle_hours") == pytest.approx(1.0)
    assert hours(frame_, "held_idle_hours") == pytest.approx(1.0)
    assert frame_["active_ratio"].to_list() == [0.0]


def test_holder_without_activity_is_unknown(tmp_path):
    # Two hours of memory readings and no activity field at all.
    win = window(2)
    path = warehouse(tmp_path, win, frame(rows("GPU-1", minutes(120), act=None, fb=30_000.0)))
    frame_ = held(path, win)
    assert hours(frame_, "held_hours") == pytest.approx(2.0)
    assert hours(frame_, "idle_hours") == 0.0
    assert frame_["active_ratio"].is_null().all()
    with Warehouse.open(path, read_only=True) as wh:
        usage = usage_of(wh, [Part(win, "raw")], Rules.of(Settings()))
    assert usage["card_hours"].sum() == pytest.approx(2.0)
    assert usage["active_ratio"].is_null().all()


def test_nan_and_negative_activity_are_not_readings(tmp_path):
    act: list[float] = [0.01] * 60
    act[10], act[30], act[31] = math.nan, -1.0, -0.5
    win = window(1)
    frame_ = held(warehouse(tmp_path, win, frame(rows("GPU-1", minutes(60), act=act))), win)
    assert hours(frame_, "idle_hours") == pytest.approx(1.0)
    assert frame_["active_ratio"].to_list() == pytest.approx([0.01])


def test_pod_restarted_on_the_same_card(tmp_path):
    # p1 idle minutes 0-59; the card unheld at minutes 60-61; p1 again from minute 62,
    # idle for 20 minutes (too short) then busy until minute 120.
    first = rows("GPU-1", minutes(60))
    free = rows("GPU-1", minutes(2, 60), ns=None, act=0.0, fb=0.0)
    again = rows("GPU-1", minutes(58, 62), act=[0.01] * 20 + [0.8] * 38)
    win = window(2)
    path = warehouse(tmp_path, win, frame(first, free, again))
    frame_ = held(path, win)
    assert hours(frame_, "held_hours") == pytest.approx((60 + 58) / 60)
    assert hours(frame_, "idle_hours") == pytest.approx(1.0)
    with Warehouse.open(path, read_only=True) as wh:
        allocs = allocation_runs(wh, win, RULES)
    assert allocs["start_ts"].to_list() == [at(0), at(minutes=62)]
    assert allocs["end_ts"].to_list() == [at(1), at(2)]


def test_scrape_gap_longer_than_the_tolerance_ends_the_allocation(tmp_path):
    # The whole card unseen from minute 60 to minute 180 (2 h > 1 h tolerance).
    samples = frame(rows("GPU-1", minutes(60)), rows("GPU-1", minutes(60, 180)))
    win = window(4)
    inventory = gpus({"uuid": "GPU-1", "first_seen": T0, "last_seen": at(minutes=239)})
    path = warehouse(tmp_path, win, samples, gpus=inventory)
    with Warehouse.open(path, read_only=True) as wh:
        allocs = allocation_runs(wh, win, RULES)
        bill = compute_bill(wh, win, Settings())
    assert allocs["end_ts"].to_list() == [at(1), at(4)]
    assert_conserved(bill)
    lines = by_team(bill)
    assert lines["vision"]["card_hours"] == pytest.approx(2.0)
    assert lines["unallocated"]["card_hours"] == pytest.approx(2.0)
    assert lines["vision"]["cost"] == 6.00


def test_two_rows_of_one_device_at_one_time_count_once(tmp_path):
    # The second copy of each row carries only the memory field (the other replica's scrape).
    win = window(1)
    path = warehouse(tmp_path, win, frame(rows("GPU-1", minutes(60), fb=None)))
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO gpu_sample_values SELECT * REPLACE (NULL AS gr_engine_active, "
                    "4096.0 AS fb_used_mib) FROM gpu_sample_values")  # gpu_samples is a view
        assert con.execute("SELECT count(*) FROM gpu_samples").fetchall() == [(120,)]
    frame_ = held(path, win)
    assert hours(frame_, "held_hours") == pytest.approx(1.0)
    assert hours(frame_, "idle_hours") == pytest.approx(1.0)
    assert hours(frame_, "held_idle_hours") == pytest.approx(1.0)
    assert frame_["fb_used_max_mib"].to_list() == [4096.0]


def test_bill_does_not_depend_on_the_collection_step(tmp_path):
    # GPU-1 held minutes 0-89, its last sample at minute 89; GPU-2 unheld minutes 0-119.
    samples = frame(rows("GPU-1", minutes(90), act=0.5), rows("GPU-2", minutes(120), ns=None))
    inventory = gpus(
        {"uuid": "GPU-1", "first_seen": T0, "last_seen": at(minutes=89)},
        {"uuid": "GPU-2", "gpu_index": 1, "first_seen": T0, "last_seen": at(minutes=119)},
    )
    win = window(3)
    path = warehouse(tmp_path, win, samples, gpus=inventory)
    bills = []
    with Warehouse.open(path, read_only=True) as wh:
        for step in ("30s", "60s"):
            settings = Settings.model_validate({"prometheus": {"step": step}})
            bills.append(compute_bill(wh, win, settings, ("team",), source="raw"))
    thirty, sixty = (b.lines.select("team", "card_hours", "cost").sort("team") for b in bills)
    assert thirty.to_dicts() == sixty.to_dicts()
    assert bills[0].fleet_cost == bills[1].fleet_cost
    lines = by_team(bills[0])
    assert lines["vision"]["card_hours"] == pytest.approx(1.5)  # 90 one-minute samples
    assert lines["unallocated"]["card_hours"] == pytest.approx(2.0)  # GPU-2 minutes 0-120
    assert lines["vision"]["cost"] == 4.50
    assert lines["unallocated"]["cost"] == 6.00


def test_last_sample_of_a_sparsely_scraped_card_stands_for_its_own_spacing(tmp_path):
    # GPU-1 scraped every 5 minutes with nobody holding it, samples at minutes 0, 5, ..., 115:
    # present from minute 0 to 115 + 5 = 120, two full card-hours of unallocated capacity (a
    # 60 s fallback would have ended it at minute 116).
    five_minutes = [k * 5 * MINUTE for k in range(24)]
    inventory = gpus({"uuid": "GPU-1", "first_seen": T0, "last_seen": at(minutes=115)})
    win = window(3)
    path = warehouse(tmp_path, win, frame(rows("GPU-1", five_minutes, ns=None)), gpus=inventory)
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, win, Settings(), ("team",), source="raw")
    assert by_team(bill)["unallocated"]["card_hours"] == pytest.approx(2.0)
    assert bill.fleet_card_hours == pytest.approx(2.0)


# The hole rule (decision 0168) -----------------------------------------------------------------

STALE_MIN = RULES.staleness_us / 60e6  # 5 minutes


def held_per_pod(path: Path, win: Window, rules: SamplingRules = RULES) -> dict[str | None, float]:
    with Warehouse.open(path, read_only=True) as wh:
        frame_ = held_hourly(wh, win, rules)
    return {pod: float(part["held_hours"].sum()) * 60
            for (pod,), part in frame_.group_by("pod")}  # minutes per pod


def split_minute(last_a: float, first_b: float, spacing: float = 1.0) -> float:
    """Where the hole between a's last sample and b's first is split, by the rule written out:
    the hole is the time past a's own spacing; each side takes half of it, at most the
    staleness bound; a stands until there."""
    hole = first_b - last_a - spacing
    return last_a + spacing + min(hole / 2, STALE_MIN)


def test_holder_change_inside_a_hole_is_split_at_its_midpoint(tmp_path):
    # a at minutes 0-29, scrapes at 30-33 missed, b from minute 34 to 59.
    samples = frame(rows("GPU-1", minutes(30), pod="a"), rows("GPU-1", minutes(26, 34), pod="b"))
    win = window(1)
    path = warehouse(tmp_path, win, samples)
    cut = split_minute(29, 34)
    assert cut == 32.0
    assert held_per_pod(path, win) == pytest.approx({"a": cut, "b": 60 - cut})
    # the old rule gave the whole hole to a: b was billed from its first sample
    assert held_per_pod(path, win, replace(RULES, hole_rule=HOLE_RULE_V1)) == pytest.approx({"a": 34.0, "b": 26.0})


def test_a_hole_longer_than_twice_the_staleness_bound_leaves_its_middle_unheld(tmp_path):
    # a at minutes 0-19, nothing at 20-39, b at 40-59: 20 minutes of hole.
    samples = frame(rows("GPU-1", minutes(20), pod="a"), rows("GPU-1", minutes(20, 40), pod="b"))
    win = window(1)
    inventory = gpus({"uuid": "GPU-1", "first_seen": T0, "last_seen": at(minutes=59)})
    path = warehouse(tmp_path, win, samples, gpus=inventory)
    a_until = split_minute(19, 40)
    b_from = 40 - min((40 - 19 - 1) / 2, STALE_MIN)
    assert (a_until, b_from) == (25.0, 35.0)
    assert held_per_pod(path, win) == pytest.approx({"a": a_until, "b": 60 - b_from})
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, win, Settings(), ("team",), source="raw")
    assert_conserved(bill)
    assert by_team(bill)["unallocated"]["card_hours"] == pytest.approx((b_from - a_until) / 60)


def test_one_holder_on_both_sides_of_a_hole_holds_all_of_it(tmp_path):
    samples = frame(rows("GPU-1", minutes(30)), rows("GPU-1", minutes(26, 34)))
    win = window(1)
    assert held_per_pod(warehouse(tmp_path, win, samples), win) == pytest.approx({"p1": 60.0})


def test_a_pod_starting_in_a_hole_is_billed_from_its_middle(tmp_path):
    # The card free (no pod labels) at minutes 0-29, unseen 30-34, pod b from minute 35: its
    # first sample comes 6 minutes after the card's previous one (5 minutes of hole).
    samples = frame(rows("GPU-1", minutes(30), ns=None), rows("GPU-1", minutes(25, 35), pod="b"))
    win = window(1)
    path = warehouse(tmp_path, win, samples)
    start = split_minute(29, 35)
    assert start == 32.5
    held = held_per_pod(path, win)
    assert held == pytest.approx({"b": 60 - start})
    with Warehouse.open(path, read_only=True) as wh:
        allocs = allocation_runs(wh, win, RULES)
    assert allocs["start_ts"].to_list() == [at(minutes=start)]


def test_the_reach_back_into_a_hole_is_activity_unknown_not_idle(tmp_path):
    # Decision 0179: the card free at minutes 0-25, unseen 26-30, pod b idle (1 % active) from
    # minute 31 to 59. b reaches back over half the hole (to 28.5), but no reading of b exists
    # before minute 31: those 2.5 minutes are activity unknown, and b's idle run is its 29
    # minutes of rows, under the 30-minute minimum. Under 0168 as first written (v2) the reach
    # back took b's first reading, the run was 31.5 minutes, and all of it was billed idle.
    samples = frame(rows("GPU-1", minutes(26), ns=None), rows("GPU-1", minutes(29, 31), pod="b"))
    win = window(1)
    path = warehouse(tmp_path, win, samples)
    start = split_minute(25, 31)
    assert start == 28.5
    assert held_per_pod(path, win) == pytest.approx({"b": 60 - start})
    with Warehouse.open(path, read_only=True) as wh:
        now = held_hourly(wh, win, RULES)
        then = held_hourly(wh, win, replace(RULES, hole_rule=HOLE_RULE_V2))
        bill = compute_bill(wh, win, Settings(), ("team",), source="raw")
    assert hours(now, "idle_hours") == 0.0  # 29 minutes of rows < 30
    assert hours(then, "idle_hours") * 60 == pytest.approx(60 - start)
    vision = by_team(bill)["vision"]
    assert vision["card_hours"] * 60 == pytest.approx(60 - start)
    assert vision["idle_card_hours"] == 0.0
    # the hour has readings (b's), so it is not an activity-unknown hour: its ratio is b's
    assert float(now["active_ratio"].drop_nulls().max()) == pytest.approx(0.01)
    assert_conserved(bill)
