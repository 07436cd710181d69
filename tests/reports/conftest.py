"""Fixtures: one simulated two-month warehouse per session, copied for each test that writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.reports.fleet import load


@pytest.fixture(scope="session")
def base_warehouse(tmp_path_factory) -> Path:
    """November and December 2024 of the small simulated fleet (read it, never write it)."""
    path = tmp_path_factory.mktemp("reports-base") / "base.duckdb"
    load(path)
    return path


@pytest.fixture
def warehouse(base_warehouse, tmp_path) -> Path:
    """A private copy of the base warehouse."""
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(base_warehouse, path)
    return path
