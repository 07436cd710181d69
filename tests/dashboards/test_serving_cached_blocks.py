"""`refresh-serving` starts every result with the warehouse's DuckDB cache handed back where
the bound cannot hold the warehouse (decision 0280; this test's 11 MB warehouse is taken as
larger than its bound, the rule itself is tests/foundation/test_cached_blocks.py), every result
still computed; where the bound holds it (the control, DuckDB's own way) every result starts
with several MB of blocks cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuledger.dashboards import serving_results
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import settings_with_roles
from tests.foundation.test_cached_blocks import LEFT, LIMIT, cached_bytes


@pytest.mark.parametrize("release", [True, False], ids=["handed-back", "control-kept"])
def test_every_result_starts_with_the_cache_handed_back(
    demo_copy: Path, monkeypatch: pytest.MonkeyPatch, release: bool,
) -> None:
    cached: dict[str, int] = {}
    real = serving_results.compute

    def seen(wh: Warehouse, settings: Any, name: str, period: str, *args: Any, **kw: Any) -> bytes:
        cached[f"{name} {period}"] = cached_bytes(wh.con)
        return real(wh, settings, name, period, *args, **kw)

    monkeypatch.setattr(serving_results, "compute", seen)
    monkeypatch.setattr(Warehouse, "_bound_below_file", lambda self: release)
    with Warehouse.open(demo_copy, read_only=True, limits=LIMIT) as wh:
        serving_results.refresh_serving(wh, settings_with_roles())
    assert len(cached) == len(serving_results.NAMES) * 2 == len(serving_results.LAST_TIMINGS)  # two months
    if release:
        assert max(cached.values()) <= LEFT, cached
    else:
        assert min(cached.values()) > 3 * LEFT, cached
