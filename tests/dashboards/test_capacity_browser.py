"""The Capacity now page in a real headless Chromium (as tests/dashboards/test_teams_browser.py).

Case: a lead, landed on their team page, follows the navigation's "Capacity now" link; the
shape grid shows one row per row of `/api/v1/capacity` (fetched in the same session: the lead's
answer), with the same ready amounts, and the headroom grid one row per queue row; the
inventory line states the document's time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuledger.dashboards.app import RunningServer
from tests.dashboards.conftest import PERIOD, lead_headers
from tests.dashboards.test_browser import PAGE_READY
from tests.dashboards.test_teams_browser import GRID_ROWS, serve_demo_copy

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[RunningServer]:
    yield from serve_demo_copy(tmp_path_factory, demo_source, "capacity-browser")


def test_lead_opens_capacity_from_the_navigation(server: RunningServer, open_page: Any) -> None:
    page = open_page(lead_headers())
    page.goto(f"{server.url}/?period={PERIOD}")
    page.wait_for_selector(PAGE_READY)
    page.click("#nav-capacity")
    page.wait_for_selector("#capacity-table .ag-row")
    answer = page.request.get(f"{server.url}/api/v1/capacity")
    assert answer.status == 200
    doc = answer.json()
    rows = page.evaluate(GRID_ROWS, ["capacity-table", False])
    key = ("cluster", "pool", "model", "shape")
    assert sorted((tuple(r[k] for k in key), float(r["ready"])) for r in rows) == sorted(
        (tuple(r[k] for k in key), float(r["ready"])) for r in doc["capacity"])
    page.wait_for_selector("#capacity-queues .ag-row")
    assert len(page.evaluate(GRID_ROWS, ["capacity-queues", False])) == len(doc["queues"]) > 0
    assert doc["at"].replace("T", " ").rstrip("Z") in page.inner_text("#capacity-at")
    assert "/capacity" in page.url and f"period={PERIOD}" in page.url
