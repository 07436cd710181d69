"""The autoscaling proposals kept per Deployment as the days are read (issue 34) equal the
proposals of the month's frame read whole, sorted and prepared at once (the path before,
frozen in tests/advice/autoscaling_frame_reference.py): every field of every proposal, exactly,
on the dashboards' demo fleet (serving Deployments with vLLM gauges and token counters, a
window across a UTC day and month boundary) and on the diurnal Deployment of two days."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from gpuledger.analytics.advice.autoscaling_month import in_threads
from gpuledger.analytics.advice.run import autoscaling_advice_kind, autoscaling_proposals
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.advice.autoscaling_frame_reference import reference_proposals
from tests.advice.test_autoscaling_warehouse import HOURS
from tests.advice.test_autoscaling_warehouse import _frames as diurnal_frames
from tests.analytics.builders import load, window
from tests.dashboards.conftest import build_demo_warehouse

DEMO = Window(datetime(2026, 10, 31, 18, tzinfo=UTC), datetime(2026, 11, 1, 12, tzinfo=UTC))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_warehouse(tmp_path_factory.mktemp("demo") / "demo.duckdb")


def test_the_demo_fleet_proposals_equal_the_whole_month_path(demo: Path) -> None:
    with Warehouse.open(demo, read_only=True) as wh:
        new = autoscaling_proposals(wh, DEMO, Settings())
        old = reference_proposals(wh, DEMO, Settings())
        kind = autoscaling_advice_kind(wh, DEMO, Settings())
    assert len(new) >= 2, "the demo has serving Deployments"
    assert [p.as_dict() for p in new] == [p.as_dict() for p in old]
    assert new == old  # every field, the policy and the unrounded GPU-hours included
    assert any(p.batching for p in new) or any(p.gpu_hours_saved > 0 for p in new)
    assert [d["deployment"] for d in kind.document["deployments"]] == [p.deployment for p in old]


def test_the_diurnal_deployment_equals_the_whole_month_path(tmp_path: Path) -> None:
    path = load(tmp_path / "wh.duckdb", window(HOURS), diurnal_frames())
    with Warehouse.open(path, read_only=True) as wh:
        new = autoscaling_proposals(wh, window(HOURS), Settings())
        old = reference_proposals(wh, window(HOURS), Settings())
    assert len(new) == 1 and new == old
    assert new[0].gpu_hours_saved > 0


def test_the_replays_in_threads_come_back_in_order_taking_few_ahead() -> None:
    """`in_threads` hands the results in the calls' order whatever thread finished first, and
    takes at most twice its workers' calls ahead of the result it hands out (the Deployments'
    minutes held at once stay a few, not a pass's)."""
    taken: list[int] = []

    def calls() -> Iterator[Callable[[], int]]:
        for i in range(40):
            taken.append(i)
            yield partial(pow, i, 2)

    handed: list[int] = []
    for result in in_threads(calls(), workers=2):
        assert len(taken) - len(handed) <= 2 * 2 + 1
        handed.append(result)
    assert handed == [i * i for i in range(40)]
    with pytest.raises(ZeroDivisionError):  # a replay's failure is the caller's, not lost in a thread
        list(in_threads([partial(divmod, 1, 1), partial(divmod, 1, 0)]))
