"""The Volcano pool and the preemption line in a real headless Chromium (the demo warehouse).

- the team page shows "GPU-hours lost to preemption" with the bill's figure for the team and
  the PriorityClass table; the Queues page shows the Volcano Queues table with every stored
  Queue; screenshots of both are saved under this test's output folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.core.period import Period
from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.dashboards.pages.common import number
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import (
    ARGS,
    CHROMIUM,
    LEAD_TEAM,
    PERIOD,
    admin_headers,
    demo_source,
    settings_with_roles,
)
from tests.dashboards.test_browser import PAGE_READY

__all__ = ["demo_source"]
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory, demo_source) -> Iterator[tuple[RunningServer, Path]]:
    folder = tmp_path_factory.mktemp("volcano-browser")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    running = start_server(create_app(settings_with_roles(), path, cache_dir=folder / "cache"), "127.0.0.1", 0)
    yield running, path
    running.stop()


@pytest.fixture(scope="module")
def expected(demo_source) -> tuple[Any, list[str]]:
    """The lost hours and Queue names, read from the source file before the app runs (the app
    may publish its serving store from the copy it serves, holding that file's writer lock)."""
    with Warehouse.open(demo_source, read_only=True) as wh:
        lost = compute_bill(wh, Period.exact(PERIOD).window, settings_with_roles()).preemption
        queues = wh.query("SELECT name FROM queues WHERE kind = 'Queue' ORDER BY name")["name"].to_list()
    return lost, queues


def test_team_page_and_queues_page_in_chromium(expected, server, tmp_path_factory) -> None:
    from playwright.sync_api import sync_playwright

    running, _ = server
    lost, queues = expected
    assert lost is not None
    hours = float(lost.filter(lost["team"] == LEAD_TEAM)["lost_gpu_hours"].sum())
    shots = tmp_path_factory.mktemp("volcano-shots")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, extra_http_headers=admin_headers())
        page: Any = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{running.url}/team?period={PERIOD}&team={LEAD_TEAM}")
        page.wait_for_selector(PAGE_READY)
        page.wait_for_selector("#preemption-line")
        assert page.inner_text("#preemption-line").startswith(f"GPU-hours lost to preemption: {number(hours)}")
        assert "PriorityClass" in page.inner_text("#team-priority-table")
        page.screenshot(path=str(shots / "team.png"), full_page=True)
        page.click("#nav-queues")
        page.wait_for_selector("#volcano-queue-table")
        text = page.inner_text("#volcano-queue-table")
        assert all(q in text for q in queues) and "deserved GPUs" in text
        page.screenshot(path=str(shots / "queues.png"), full_page=True)
        context.close()
        browser.close()
    print(f"screenshots in {shots}")
