"""Fixtures the advice tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.advice.test_day_parts import DATA
from tests.analytics.builders import simulated


@pytest.fixture(scope="session")
def serving_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 GPUs over `DATA`: eight serving Deployments, some in each of three autoscaling passes
    (`autoscaling_month.pass_of`), made once for the tests of the month in passes and of its
    kept pieces (each test works on its own copy)."""
    return simulated(tmp_path_factory.mktemp("serving") / "wh.duckdb", 64, DATA, seed=11)
