"""The allocations' statistics kept whole in the day parts (`DayParts.spanning`, decision 0261).

A refresh keeps the window's per-allocation statistics under every day's inputs stamp and asks
again only for the allocations with a sample in a day whose stamp moved, each over the whole
window. Every case holds the result equal to a full `allocation_stats` over the warehouse as it
is then (the independent computation: one statement over every sample; its floats to a
rounding step, `_assert_full`), and holds the second
read smaller than the first (the allocations asked for again, counted):
- the running day grows by an hour (the chart's collect);
- a sample of an old day is corrected (a backfill), while the newest day is unchanged;
- an allocation that lived in one changed day only loses all its samples: it is gone, not kept;
- an allocation of an unchanged day gains samples in a changed one (the same pod on the same
  card again): one row over both, not the kept one beside the new;
- nothing changed: no statement at all.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.analytics.workloads.requested import KEYS, allocation_stats
from gpuledger.core.activity import DEFAULT_SOURCE
from gpuledger.core.steady import STEADY_DECIMALS
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import DayParts, day_parts_path
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries import workloads
from gpuledger.warehouse.sample_fingerprints import SAMPLES, rebuild
from tests.analytics.builders import simulated

WINDOW = Window(datetime(2026, 10, 29, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
"""Three whole UTC days, every one with samples."""
DAY_ONE, DAY_TWO, DAY_THREE = WINDOW.days()
LAST_HOUR = (WINDOW.end - timedelta(hours=1), WINDOW.end)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulated(tmp_path_factory.mktemp("kept") / "wh.duckdb", 24, WINDOW, seed=5)


@pytest.fixture
def copy(fleet: Path, tmp_path: Path) -> Path:
    return Path(shutil.copyfile(fleet, tmp_path / "wh.duckdb"))


class Counted:
    """`workloads.allocation_stats` as the parts call it, with what each call asked and got."""

    def __init__(self) -> None:
        self.calls: list[tuple[Sequence[tuple[datetime, datetime]], int]] = []

    def __call__(self, wh: ReadableWarehouse, lo: datetime, hi: datetime,
                 touching: Sequence[tuple[datetime, datetime]]) -> pl.DataFrame:
        found = workloads.allocation_stats(wh, lo, hi, DEFAULT_SOURCE, touching)
        self.calls.append((touching, found.height))
        return found


def _ordered(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(list(KEYS), nulls_last=True)


def _through_parts(path: Path) -> tuple[pl.DataFrame, Counted]:
    read = Counted()
    with Warehouse.open(path, read_only=True) as wh, DayParts(day_parts_path(path)) as days:
        found = days.spanning("allocation_stats:test", wh, WINDOW, read, KEYS)
    return _ordered(found), read


def _full(path: Path) -> pl.DataFrame:
    with Warehouse.open(path, read_only=True) as wh:
        return _ordered(workloads.allocation_stats(wh, WINDOW.start, WINDOW.end, DEFAULT_SOURCE))


def _assert_full(found: pl.DataFrame, path: Path) -> None:
    """`found` equals the full statement's rows (`_assert_same`)."""
    _assert_same(found, _full(path))


def _assert_same(found: pl.DataFrame, expected: pl.DataFrame) -> None:
    """Every key, count and time exactly, the floats to a rounding step of `steady` (what every
    reader rounds them to): the mean is an exact sum (decision 0263), but the standard
    deviation's last bits follow the order DuckDB's threads combine in."""
    assert_frame_equal(found, expected, check_exact=False, rel_tol=0, abs_tol=1.5 * 10.0**-STEADY_DECIMALS)


def _edit(path: Path, sql: str, params: Sequence[object] = ()) -> None:
    """`sql` stands for a load (a re-collect, a backfill): the samples' fingerprints are then
    what a load keeps them as (`test_sample_fingerprints` holds every writer to `rebuild`'s)."""
    with Warehouse.open(path) as wh:
        wh.con.execute(sql, list(params))
        rebuild(wh.con, SAMPLES)


def _kept_then(copy: Path, edit: str, params: Sequence[object] = ()) -> tuple[pl.DataFrame, Counted]:
    """The parts filled from the warehouse as it is, `edit` applied, the parts read again."""
    first, read = _through_parts(copy)
    assert read.calls == [((), first.height)], "the first read asks for every allocation"
    _assert_full(first, copy)
    _edit(copy, edit, params)
    return _through_parts(copy)


def test_an_hour_more_of_the_running_day_asks_only_for_that_days_allocations(copy: Path) -> None:
    hour = "gpu_sample_values WHERE ts >= ? AND ts < ?"
    _edit(copy, f"CREATE TABLE held_back AS SELECT * FROM {hour}", LAST_HOUR)
    _edit(copy, f"DELETE FROM {hour}", LAST_HOUR)  # the month as it was an hour ago
    again, read = _kept_then(copy, "INSERT INTO gpu_sample_values SELECT * FROM held_back")
    _assert_full(again, copy)
    [(touching, asked)] = read.calls
    assert list(touching) == [(DAY_THREE.start, DAY_THREE.end)]
    assert 0 < asked < again.height, "only the allocations of the running day"


def test_a_backfilled_old_day_asks_only_for_its_allocations(copy: Path) -> None:
    again, read = _kept_then(
        copy, "UPDATE gpu_sample_values SET gpu_util = coalesce(gpu_util, 0) + 7, gr_engine_active = NULL, "
        "fb_used_mib = fb_used_mib + 512 WHERE ts >= ? AND ts < ?", (DAY_ONE.start, DAY_ONE.start + timedelta(hours=2)))
    _assert_full(again, copy)
    [(touching, asked)] = read.calls
    assert list(touching) == [(DAY_ONE.start, DAY_ONE.end)]
    assert 0 < asked < again.height


def _one_day_series(copy: Path, day: Window) -> int:
    """A series of an allocation whose every sample lies in `day`."""
    with Warehouse.open(copy, read_only=True) as wh:
        return int(wh.scalar(
            "SELECT series_id FROM gpu_sample_values v JOIN gpu_series s USING (series_id) "
            "WHERE s.namespace IS NOT NULL GROUP BY series_id HAVING min(ts) >= $lo AND max(ts) < $hi "
            "AND count(*) > 5 ORDER BY series_id LIMIT 1", {"lo": day.start, "hi": day.end}))


def test_an_allocation_whose_samples_are_dropped_is_gone(copy: Path) -> None:
    series = _one_day_series(copy, DAY_TWO)
    with Warehouse.open(copy, read_only=True) as wh:
        pod = wh.scalar("SELECT pod FROM gpu_series WHERE series_id = $s", {"s": series})
    again, read = _kept_then(copy, "DELETE FROM gpu_sample_values WHERE series_id = ?", (series,))
    _assert_full(again, copy)
    assert pod not in again["pod"].to_list()
    [(touching, _)] = read.calls
    assert list(touching) == [(DAY_TWO.start, DAY_TWO.end)]


def test_an_allocation_back_in_a_changed_day_is_one_row_over_both(copy: Path) -> None:
    series = _one_day_series(copy, DAY_ONE)
    again, read = _kept_then(  # its samples again two days later, where it has none
        copy, "INSERT INTO gpu_sample_values SELECT * REPLACE (ts + INTERVAL 2 DAY AS ts) "
        "FROM gpu_sample_values WHERE series_id = ?", (series,))
    _assert_full(again, copy)
    with Warehouse.open(copy, read_only=True) as wh:
        pod, uuid = wh.query("SELECT pod, uuid FROM gpu_series WHERE series_id = $s", {"s": series}).row(0)
    rows = again.filter((pl.col("pod") == pod) & (pl.col("uuid") == uuid))
    assert rows.height == 1
    assert rows["first_ts"][0] < DAY_ONE.end and rows["last_ts"][0] >= DAY_THREE.start
    [(touching, _)] = read.calls
    assert list(touching) == [(DAY_THREE.start, DAY_THREE.end)]


def test_unchanged_days_ask_for_nothing(copy: Path) -> None:
    first, _ = _through_parts(copy)
    again, read = _through_parts(copy)
    assert read.calls == []
    assert again.equals(first)


def test_consecutive_changed_days_are_asked_for_as_one_range(copy: Path) -> None:
    again, read = _kept_then(copy, "UPDATE gpu_sample_values SET gpu_util = 1 WHERE ts IN (?, ?)",
                             (DAY_TWO.start, DAY_THREE.start + timedelta(minutes=1)))
    _assert_full(again, copy)
    assert [list(touching) for touching, _ in read.calls] == [[(DAY_TWO.start, DAY_THREE.end)]]


def test_a_refresh_reads_the_usage_through_the_parts(copy: Path) -> None:
    """`workload_usage` as `refresh-serving` calls it: through the parts, equal to a full read."""
    with Warehouse.open(copy, read_only=True) as wh:
        whole = _ordered(allocation_stats(wh, WINDOW, DEFAULT_SOURCE, None))
        with DayParts(day_parts_path(copy)) as days:
            kept = _ordered(allocation_stats(wh, WINDOW, DEFAULT_SOURCE, days))
            assert (days.reads, days.hits) == (1, 0)
        with DayParts(day_parts_path(copy)) as days:
            again = _ordered(allocation_stats(wh, WINDOW, DEFAULT_SOURCE, days))
            assert (days.reads, days.hits) == (0, 1)
    _assert_same(kept, whole)
    assert again.equals(kept)
