"""The autoscaling replay's month in passes (decision 0269): with the minutes held at once
bounded below the month, the Deployments are replayed a group at a time, each group read again
from the day parts, and the proposals are those of one pass, every field; the warehouse is
queried once a day whatever the passes; without day parts there is one pass."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.advice import autoscaling_month
from gpuledger.analytics.advice.autoscaling_month import ServingMonth, pass_of
from gpuledger.analytics.advice.run import autoscaling_proposals
from gpuledger.core.config import Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import DayParts, day_parts_path
from gpuledger.warehouse.queries import advice as queries
from tests.advice.test_day_parts import DATA, WINDOW
from tests.analytics.builders import simulated


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 GPUs: eight serving Deployments, in each of three passes (`pass_of`)."""
    return simulated(tmp_path_factory.mktemp("passes") / "wh.duckdb", 64, DATA, seed=11)


@pytest.fixture
def copy(fleet: Path, tmp_path: Path) -> Path:
    return Path(shutil.copyfile(fleet, tmp_path / "wh.duckdb"))


def _serving(wh: Warehouse, day: Window) -> pl.DataFrame:
    return queries.serving_minutes(wh, day.start, day.end, SamplingRules.of(Settings()).activity)


def test_proposals_in_three_passes_equal_one_pass(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Warehouse.open(copy, read_only=True) as wh:
        one = autoscaling_proposals(wh, WINDOW, Settings())
        first = next(f for f in (_serving(wh, day) for day in WINDOW.days()) if not f.is_empty())
    assert len(one) >= 3, "the fleet has several serving Deployments"
    assert len({pass_of((p.namespace, p.deployment), 3) for p in one}) == 3, "each pass has some"
    # the month as sized from its first day with minutes, held in thirds
    month = first.select(autoscaling_month.REPLAY_COLUMNS).estimated_size() * len(list(WINDOW.days()))
    monkeypatch.setattr(autoscaling_month, "REPLAY_BUDGET", month // 3 + 1)
    with Warehouse.open(copy, read_only=True) as wh, DayParts(day_parts_path(copy)) as days:
        three = autoscaling_proposals(wh, WINDOW, Settings(), days=days)
        assert (days.reads, days.hits) == (2, 4)  # each day queried once, then decoded twice more
    assert three == one  # every field: the same minutes reached each Deployment's replay


def test_each_pass_holds_only_its_own_group(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autoscaling_month, "REPLAY_BUDGET", 1)
    with Warehouse.open(copy, read_only=True) as wh:
        month = ServingMonth(lambda day: _serving(wh, day), WINDOW, repeatable=True)
        handed = [(key, frame.height) for key, frame in month.deployments()]
        alone = ServingMonth(lambda day: _serving(wh, day), WINDOW, repeatable=False)
        expected = {key: frame.height for key, frame in alone.deployments()}
    assert month.passes == len(expected) > 1  # no more passes than Deployments
    assert alone.passes == 1  # days that would be queried again are read once
    assert dict(handed) == expected and len(handed) == len(expected)
    groups = [pass_of(key, month.passes) for key, _ in handed]
    assert groups == sorted(groups)  # a pass's Deployments, then the next pass's


def test_the_month_facts_are_learnt_from_every_deployment(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autoscaling_month, "REPLAY_BUDGET", 1)
    with Warehouse.open(copy, read_only=True) as wh:
        month = ServingMonth(lambda day: _serving(wh, day), WINDOW, repeatable=True)
        first_key, _ = next(month.deployments())
        frames = [_serving(wh, day) for day in WINDOW.days()]
    rows = pl.concat(frames)
    widest = rows.group_by("namespace", "deployment").agg(pl.col("gpus_per_replica").max())
    assert month.widest == {(str(ns), str(dep)): int(g) for ns, dep, g in widest.iter_rows() if g is not None}
    assert month.models and first_key in month.widest
