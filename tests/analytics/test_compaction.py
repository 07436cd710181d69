"""Retention: after `warehouse.retention.compact` removes old raw samples, the bills of the old
period equal what they were before, to the cent, on every line.

A 24-card default fleet (exclusive, MIG, time-sliced, vGPU) over three days of 1-minute samples
in a real warehouse file, rolled up day by day as collection does; raw samples before the third
day (less the sample pass's margin) are then removed. Checked:
- the rows removed are exactly the raw rows of the removable hours (counted before, by an
  independent query), rows of the kept window stay, and the roll-up and allocations are
  untouched;
- the bill of the first two days (auto source, device grain and lines grain) and a bill
  reaching into the kept day are identical before and after;
- a second compaction removes nothing; a warehouse without a roll-up loses nothing;
- `gpuledger compact` does the same from the command line; bad settings are one line.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
from gpuledger.analytics.usage.rollup import compact_raw_samples, rollup_batch
from gpuledger.cli import main
from gpuledger.core.config import Settings, load_settings
from gpuledger.core.config_retention import RetentionSettings
from gpuledger.core.errors import ConfigError
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import HOUR, Window, floor_time
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.retention import compact, removed_before

START = datetime(2026, 11, 1, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(days=3))
OLD = Window(START, START + timedelta(days=2))
BY = ("team", "model", "sharing_mode", "pool")
MONEY = [*BY, "list_cost", "sharing_discount", "cost", "idle_cost"]


def _load(path: Path, *, rolled: bool) -> None:
    sim = Simulation(FleetSpec.default(gpus=24), WINDOW, seed=11)
    inventory = sim.inventory()
    inventory.pop("mig_instances")
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=inventory))
        for chunk, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames=frames, window=chunk))
        if rolled:
            for day in WINDOW.days():
                wh.load(rollup_batch(wh, day, Settings()))


def _bills(path: Path) -> list[Bill]:
    with Warehouse.open(path, read_only=True) as wh:
        return [
            compute_bill(wh, OLD, Settings(), by=BY),
            compute_bill(wh, OLD, Settings(), by=BY, grain="lines"),
            compute_bill(wh, Window(START + timedelta(hours=30), WINDOW.end), Settings(), by=BY),
        ]


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("retention") / "rolled.duckdb"
    _load(path, rolled=True)
    return path


def test_compaction_keeps_old_bills_to_the_cent(rolled: Path):
    before = _bills(rolled)
    margin = SamplingRules.of(Settings()).margin
    keep_from = START + timedelta(days=2)
    end = floor_time(keep_from - margin, HOUR)  # whole hours go, the margin's hour stays
    with Warehouse.open(rolled) as wh:
        raw_old = wh.scalar("SELECT count(*) FROM gpu_samples WHERE ts < ?", [end])
        raw_total = wh.count("gpu_samples")
        derived = {t: wh.count(t) for t in ("card_hours_hourly", "allocations", "gpus")}
        # raw_days=1 on the evening of the third day: the third day stays.
        settings = Settings(retention=RetentionSettings(raw_days=1))
        stats = compact_raw_samples(wh, settings, WINDOW.end + timedelta(hours=20))
        assert stats.removed_rows == raw_old > 0
        assert stats.kept_rows == raw_total - raw_old == wh.count("gpu_samples")
        assert wh.scalar("SELECT min(ts) FROM gpu_samples") >= end
        assert {t: wh.count(t) for t in derived} == derived
        assert removed_before(wh) == stats.removed_before == end
        again = compact(wh, keep_from, margin=margin, rollup_source=ROLLUP_SOURCE)
        assert again.removed_rows == 0
    after = _bills(rolled)
    for old, new in zip(before, after, strict=True):
        assert new.fleet_cost == old.fleet_cost
        assert new.fleet_card_hours == pytest.approx(old.fleet_card_hours, abs=1e-9)
        assert new.lines.select(MONEY).rows() == old.lines.select(MONEY).rows()
        assert new.source == old.source


def test_nothing_goes_before_it_is_rolled_up(tmp_path: Path):
    path = tmp_path / "raw.duckdb"
    _load(path, rolled=False)
    with Warehouse.open(path) as wh:
        total = wh.count("gpu_samples")
        stats = compact(wh, WINDOW.end, margin=timedelta(0), rollup_source=ROLLUP_SOURCE)
        assert stats.removed_rows == 0 and stats.removed_before is None
        assert wh.count("gpu_samples") == total
        assert removed_before(wh) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("retention:\n  raw_days: 0\n", r"retention\.raw_days: Input should be greater than or equal to 1"),
        ("retention:\n  raw_days: true\n", r"retention\.raw_days"),
        ("retention:\n  raw_dayz: 30\n", r"retention\.raw_dayz: Extra inputs are not permitted"),
    ],
)
def test_bad_retention_settings_get_one_line(tmp_path: Path, text: str, expected: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected):
        load_settings(path)
    assert load_settings(None).retention.raw_days == 35


def test_compact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`gpuledger compact --raw-days 1` on data a month old removes every rolled-up hour but
    the margin's; a bad value is one line and exit 2."""
    path = tmp_path / "cli.duckdb"
    _load(path, rolled=True)
    margin = SamplingRules.of(Settings()).margin
    end = floor_time(WINDOW.end - margin, HOUR)  # now - 1 day is later than the roll-up's end
    with Warehouse.open(path, read_only=True) as wh:
        expected = wh.scalar("SELECT count(*) FROM gpu_samples WHERE ts < ?", [end])
    assert main(["--warehouse", str(path), "compact", "--raw-days", "1", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["removed_rows"] == expected > 0
    assert document["removed_before"] == end.isoformat()
    assert main(["--warehouse", str(path), "compact", "--raw-days", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--raw-days" in err and "\n" not in err
