"""Shared fixtures for the collector tests: the tiny fleet's OpenMetrics file and settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.core.config import FallbackRule, Settings, TeamSettings
from tests.collectors import tinyfleet


@pytest.fixture(scope="session")
def tiny_openmetrics(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinyfleet.write(tmp_path_factory.mktemp("tinyfleet") / "tiny.om")


def tiny_settings(**prometheus: object) -> Settings:
    return Settings(
        teams=TeamSettings(fallback=(FallbackRule(namespace_regex="team-(.*)", team=r"\1"),)),
        prometheus={"chunk": "1h", "retries": 1, "timeout_s": 10, **prometheus},
    )
