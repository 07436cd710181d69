"""The autoscaling replay's month in passes (decisions 0269, 0277, 0287): with the minutes held at
once bounded below the month, the Deployments are replayed a group at a time, each pass reading
its piece of every day (kept in the day parts, or set aside when the day was read whole), and
the proposals are those of one pass, every field; each day is read once whatever the passes,
with day parts or without."""

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
from tests.advice.test_day_parts import WINDOW


@pytest.fixture
def copy(serving_fleet: Path, tmp_path: Path) -> Path:
    return Path(shutil.copyfile(serving_fleet, tmp_path / "wh.duckdb"))


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
        assert (days.reads, days.hits) == (2, 0)  # each day queried once, never decoded again
        again = autoscaling_proposals(wh, WINDOW, Settings(), days=days)
        assert (days.reads, days.hits) == (2, 2)  # the next refresh decodes each kept day once
        unkept = autoscaling_proposals(wh, WINDOW, Settings())
    assert three == one  # every field: the same minutes reached each Deployment's replay
    assert again == one and unkept == one


def test_each_pass_holds_only_its_own_group(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autoscaling_month, "REPLAY_BUDGET", 1)
    read: list[Window] = []
    with Warehouse.open(copy, read_only=True) as wh:
        month = ServingMonth(lambda day: read.append(day) or _serving(wh, day), WINDOW)
        handed = [(key, sum(day.height for day in days)) for key, days in month.deployments()]
        rows = pl.concat([_serving(wh, day) for day in WINDOW.days()])
    expected = {(str(ns), str(dep)): n for ns, dep, n in rows.group_by("namespace", "deployment").len().iter_rows()}
    assert month.passes == len(expected) > 1  # no more passes than Deployments
    assert read == list(WINDOW.days())  # each day read once, whatever the passes
    assert dict(handed) == expected and len(handed) == len(expected)
    groups = [pass_of(key, month.passes) for key, _ in handed]
    assert groups == sorted(groups)  # a pass's Deployments, then the next pass's


def test_each_deployment_is_handed_out_with_its_month_facts(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Deployment's GPUs per replica (the month's largest) is known when its pass hands it out;
    the models served, once every pass is done (the saving is priced then, `run`)."""
    from gpuledger.core.mig import canonical_model

    monkeypatch.setattr(autoscaling_month, "REPLAY_BUDGET", 1)
    with Warehouse.open(copy, read_only=True) as wh:
        month = ServingMonth(lambda day: _serving(wh, day), WINDOW)
        known = {key: month.widest.get(key) for key, _ in month.deployments()}
        rows = pl.concat([_serving(wh, day) for day in WINDOW.days()])
    widest = rows.group_by("namespace", "deployment").agg(pl.col("gpus_per_replica").max())
    assert month.passes > 1
    assert known == {(str(ns), str(dep)): None if g is None else int(g) for ns, dep, g in widest.iter_rows()}
    assert month.models == {canonical_model(str(m)) for m in rows["model"].drop_nulls().unique()}
    assert month.models, "the fleet serves models"
