"""The daily roll-up `card_hours_daily` (issue 34, docs/decisions/0236): kept equal to the hourly
roll-up, and the bill that reads whole days from it equals the bill from hourly rows only.

A 24-card default fleet (exclusive, MIG, time-sliced, vGPU) over three days of 1-minute
samples, rolled up day by day as collection does. Checked:
- every day row is the sum of its day's hourly rows (summed here in Polars from the hourly
  table, not by the product's SQL), after the roll-up, after a re-roll of a few hours under
  other rules (only that day changes, and it changes), after late samples re-rolled by
  `reroll_dirty`, and after the v016 upgrade of a file that had only hourly rows;
- bills at the device grain and the lines grain, by team, by a label grouping and by day,
  over whole days and over windows with partial days at either edge, equal to the cent the
  bills of the previous path (every hour read from the hourly roll-up), with card-hours to
  float noise; the allocated card-hours per team equal the hourly rows summed here;
- the bill does read the day rows: a day row changed by hand changes the bill;
- the day fingerprints of the hourly and daily roll-ups and the allocations (v019, 0289) equal
  the ones computed from their rows after each of those writes (the re-roll moves its day's
  only) and after the v019 upgrade of a file without them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.usage.rollup import reroll_batch, reroll_dirty, rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.frames import GPU_SAMPLES, polars_schema
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.queries import usage as q
from gpuledger.warehouse.sample_fingerprints import ROLLUPS
from tests.foundation.test_sample_fingerprints import expected, kept

START = datetime(2026, 11, 1, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(days=3))
NAMES = ["uuid", "gpu_i_id", "vgpu", "profile", "namespace", "pod", "node", "model", "pool",
         "sharing_mode", "queue"]
SUMS = ["held_hours", "card_hours", "idle_card_hours", "held_idle_card_hours"]
H = timedelta(hours=1)
WINDOWS = {
    "three whole days": WINDOW,
    "partial days at both edges": Window(START + 5 * H, START + timedelta(days=2, hours=19)),
    "a partial first day": Window(START + 7 * H, START + timedelta(days=2)),
    "inside one day": Window(START + timedelta(days=1, hours=3), START + timedelta(days=1, hours=21)),
}
GROUPINGS = {
    "team": ("team",),
    "labels": ("team", "namespace", "queue", "node", "pool", "model", "sharing_mode"),
    "day": ("team", "day"),
}


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("daily") / "rolled.duckdb"
    sim = Simulation(FleetSpec.default(gpus=24), WINDOW, seed=11)
    inventory = sim.inventory()
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=inventory))
        for chunk, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames=frames, window=chunk))
        for day in WINDOW.days():
            wh.load(rollup_batch(wh, day, Settings()))
    return path


@pytest.fixture
def fleet(rolled: Path, tmp_path: Path) -> Path:
    return Path(shutil.copy(rolled, tmp_path / "fleet.duckdb"))


def _day_rows(wh: Warehouse) -> pl.DataFrame:
    return wh.query("SELECT * FROM card_hours_daily").sort(["ts", *NAMES], nulls_last=True)


def _hours_summed(wh: Warehouse) -> pl.DataFrame:
    """The day rows computed here: the hourly rows summed per UTC day and name in Polars."""
    hourly = wh.query("SELECT * FROM card_hours_hourly")
    known = pl.col("active_ratio").is_not_null()
    return (
        hourly.with_columns(pl.col("ts").dt.truncate("1d"))
        .group_by(["ts", *NAMES])
        .agg(
            *[pl.col(c).sum() for c in SUMS],
            (pl.col("card_hours") * pl.col("active_ratio")).sum().alias("card_active"),
            pl.col("card_hours").filter(~known).sum().alias("card_unknown"),
            (pl.col("held_hours") * pl.col("active_ratio")).sum().alias("held_active"),
            pl.col("held_hours").filter(known).sum().alias("held_known"),
            pl.col("fb_used_max_mib").max(),
        )
        .sort(["ts", *NAMES], nulls_last=True)
    )


def assert_days_are_their_hours(wh: Warehouse) -> pl.DataFrame:
    days, expected = _day_rows(wh), _hours_summed(wh)
    assert days.height == expected.height > 100
    assert days.select("ts", *NAMES).equals(expected.select("ts", *NAMES))
    for col in [*SUMS, "card_active", "card_unknown", "held_active", "held_known", "fb_used_max_mib"]:
        # SQL's sum of no rows is NULL where Polars says 0; the readers coalesce both to 0
        got, want = days[col].fill_null(0.0), expected[col].fill_null(0.0)
        assert ((got - want).abs() <= 1e-9).all(), col
    return days


def assert_fingerprints_kept(wh: Warehouse) -> dict[str, dict[tuple[object, ...], tuple[int, int]]]:
    """Each roll-up table's day fingerprints as its writers kept them (v019, decision 0289)
    equal the ones computed from its stored rows (`expected`: hashed by DuckDB, summed in
    Python); each table's, by name."""
    out = {}
    for kind in ROLLUPS:
        found = kept(wh, kind)
        assert found == expected(wh, kind), kind.source
        out[kind.source] = found
    return out


def test_day_rows_are_the_sums_of_their_hours(rolled: Path):
    with Warehouse.open(rolled, read_only=True) as wh:
        days = assert_days_are_their_hours(wh)
        fingerprints = assert_fingerprints_kept(wh)
    assert days["ts"].unique().sort().to_list() == [d.start for d in WINDOW.days()]
    for table in ("card_hours_hourly", "card_hours_daily", "allocations"):
        assert [day for (day,) in fingerprints[table]] == [d.start.date() for d in WINDOW.days()], table


def _day_totals(days: pl.DataFrame) -> dict[datetime, float]:
    return dict(days.group_by("ts").agg(pl.col("idle_card_hours").sum()).iter_rows())


def test_a_reroll_of_some_hours_rewrites_their_day_only(fleet: Path):
    other = Settings.model_validate({"idle": {"threshold": 0.5}})  # far more hours count as idle
    hours = Window(START + timedelta(days=1, hours=6), START + timedelta(days=1, hours=12))
    with Warehouse.open(fleet) as wh:
        before = _day_totals(_day_rows(wh))
        printed = assert_fingerprints_kept(wh)
        wh.load(reroll_batch(wh, hours, Rules.of(other)))
        after = _day_totals(assert_days_are_their_hours(wh))
        reprinted = assert_fingerprints_kept(wh)
    day1, day2, day3 = (d.start for d in WINDOW.days())
    assert after[day2] > before[day2] + 1.0  # the re-rolled hours' day changed ...
    assert after[day1] == before[day1] and after[day3] == before[day3]  # ... and only it
    for table in ("card_hours_hourly", "card_hours_daily"):  # their fingerprints the same way
        moved = {day for day in printed[table] if reprinted[table][day] != printed[table][day]}
        assert moved == {(day2.date(),)}, table


def test_late_samples_rerolled_keep_the_days_equal(fleet: Path):
    late = Window(START + timedelta(hours=10), START + timedelta(hours=13))
    with Warehouse.open(fleet) as wh:
        held = wh.scalar("SELECT sum(card_hours) FROM card_hours_daily WHERE ts = ?", [START])
        gone = pl.DataFrame(schema=polars_schema(GPU_SAMPLES))  # the window's samples replaced by none
        wh.load(LoadBatch(frames={"gpu_samples": gone}, window=late))
        rerolled = reroll_dirty(wh, Settings())
        assert rerolled.days[0].start == START  # from the late hours to the roll-up's watermark
        assert_days_are_their_hours(wh)
        assert_fingerprints_kept(wh)
        now = wh.scalar("SELECT sum(card_hours) FROM card_hours_daily WHERE ts = ?", [START])
    assert now < held - 10  # three hours of 24 cards went


def test_an_upgraded_file_gets_the_day_rows_of_its_hours(fleet: Path):
    with Warehouse.open(fleet, read_only=True) as wh:
        expected = _day_rows(wh)
    con = duckdb.connect(str(fleet))  # the file as v015 wrote it: hourly rows, no day rows
    con.execute("DROP TABLE card_hours_daily")
    con.execute("ALTER TABLE plans DROP COLUMN twin_effect")  # v017's, after it
    con.execute("DELETE FROM schema_version WHERE version >= 16")
    con.close()
    with Warehouse.open(fleet) as wh:  # a writer migrates
        upgraded = assert_days_are_their_hours(wh)
    assert upgraded.height == expected.height


def test_an_upgraded_file_gets_the_fingerprints_of_its_rows(fleet: Path):
    con = duckdb.connect(str(fleet))  # the file as v018 wrote it: no roll-up fingerprints
    for kind in ROLLUPS:
        con.execute(f"DROP TABLE {kind.table}")
    con.execute("DELETE FROM schema_version WHERE version >= 19")
    con.close()
    with Warehouse.open(fleet) as wh:  # a writer migrates
        fingerprints = assert_fingerprints_kept(wh)
    assert all(fingerprints.values())


@pytest.fixture
def hourly_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The previous path: every hour of a window read from the hourly roll-up."""
    def hours(start: datetime, end: datetime, cuts: object = None) -> q.Reads:
        return q.Reads(((start, end),), None)
    with monkeypatch.context() as m:
        m.setattr(q.Reads, "of", staticmethod(hours))
        yield


def _bills(path: Path, window: Window) -> dict[tuple[str, str], Bill]:
    with Warehouse.open(path, read_only=True) as wh:
        return {
            (grain, name): compute_bill(wh, window, Settings(), by, source="rollup", grain=grain)  # type: ignore[arg-type]
            for grain in ("device", "lines") for name, by in GROUPINGS.items()
        }


def _same_bill(ours: Bill, before: Bill) -> None:
    keys = [c for c in ours.lines.columns if ours.lines[c].dtype in (pl.String, pl.Date)]
    a, b = ours.lines.sort(keys, nulls_last=True), before.lines.sort(keys, nulls_last=True)
    assert a.select(keys).equals(b.select(keys))
    for col in ("list_cost", "sharing_discount", "utilization_adjustment", "redistributed_cost", "cost",
                "idle_cost"):
        assert ((a[col] * 100).round() == (b[col] * 100).round()).all(), col
    for col in ("card_hours", "idle_card_hours", "held_idle_card_hours"):
        assert ((a[col] - b[col]).abs() <= 1e-9).all(), col
    assert ours.fleet_cost == before.fleet_cost


@pytest.mark.parametrize("name", WINDOWS)
def test_the_bill_from_day_rows_equals_the_bill_from_hours(rolled: Path, name: str, request: pytest.FixtureRequest):
    window = WINDOWS[name]
    ours = _bills(rolled, window)
    request.getfixturevalue("hourly_only")
    before = _bills(rolled, window)
    for key, bill in ours.items():
        _same_bill(bill, before[key])
    with Warehouse.open(rolled, read_only=True) as wh:  # team card-hours summed here from the hourly rows
        hourly = wh.query(
            "SELECT h.card_hours, n.team FROM card_hours_hourly h LEFT JOIN namespaces n USING (namespace) "
            "WHERE h.ts >= ? AND h.ts < ?", [window.start, window.end])
    expected = dict(hourly.group_by("team").agg(pl.col("card_hours").sum()).drop_nulls("team").iter_rows())
    billed = ours[("device", "team")].lines
    for team, hours in expected.items():
        assert billed.filter(pl.col("team") == team)["card_hours"].sum() == pytest.approx(hours, abs=1e-6)


def _allocated(bill: Bill) -> float:
    return float(bill.detail.filter(pl.col("kind") == "allocated")["card_hours"].sum())


def test_the_bill_reads_the_day_rows(fleet: Path):
    with Warehouse.open(fleet) as wh:
        before = [_allocated(compute_bill(wh, WINDOW, Settings(), source="rollup", grain=g))
                  for g in ("device", "lines")]
        wh.execute("UPDATE card_hours_daily SET card_hours = card_hours + 1 WHERE rowid = "
                   "(SELECT min(rowid) FROM card_hours_daily WHERE ts = ?)", [START])
        after = [_allocated(compute_bill(wh, WINDOW, Settings(), source="rollup", grain=g))
                 for g in ("device", "lines")]
    assert after == pytest.approx([b + 1 for b in before])
