"""The dashboard in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

Cases:
- every page loads as an admin on the demo warehouse and leads with a picture; a screenshot of
  each is saved under this test's output folder;
- a click on the fleet heatmap opens that node's GPUs (the node goes into the URL); "all nodes"
  goes back;
- My team shows the numbers `compute_bill` gives for the team (cost, card-hours, idle cost);
  Fleet shows the bill's fleet cost;
- changing the GPU-model filter writes it into the URL and the numbers become the bill's
  (team, model) line; opening that URL in a fresh tab shows the same view;
- an admin approves a plan and sees its status change to `approved`;
- a lead: the Plans page and another team's page are refused; the approve callback posted from
  the lead's browser session (fetch to the Dash endpoint) is refused server-side and the plan
  stays as it was; the other team's CSV is 403;
- production mode without the proxy headers answers 401; the same headers from a peer that is
  not a configured proxy are ignored (401).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.dashboards.pages.common import money
from gpuledger.optimizer.plan.store import load_record
from tests.dashboards.conftest import (
    LEAD_TEAM,
    MIG_PLAN,
    OTHER_TEAM,
    PERIOD,
    admin_headers,
    lead_headers,
    settings_with_roles,
)

pytestmark = pytest.mark.browser

PAGE_READY = "#teams-page, #team-page, #fleet-page, #queues-page, #capacity-page, #plans-page, #refusal, #error, #busy"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[RunningServer]:
    import shutil

    folder = tmp_path_factory.mktemp("dash-browser")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    app = create_app(settings_with_roles(), path, cache_dir=folder / "cache")
    running = start_server(app, "127.0.0.1", 0)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def goto(page: Any, url: str) -> Any:
    response = page.goto(url)
    page.wait_for_selector(PAGE_READY)
    return response


def bill_line(reference_bills: dict, period: str, by: tuple[str, ...], **keys: str) -> dict[str, Any]:
    rows = reference_bills[(period, by)].lines
    for k, v in keys.items():
        rows = rows.filter(pl.col(k) == v)
    return rows.row(0, named=True)


def test_every_page_as_admin(server: RunningServer, open_page: Any, shots: Path, reference_bills: dict) -> None:
    page = open_page(admin_headers())
    ref = bill_line(reference_bills, PERIOD, ("team",), team=LEAD_TEAM)
    goto(page, f"{server.url}/team?period={PERIOD}&team={LEAD_TEAM}")
    page.wait_for_selector("#team-daily .main-svg")
    assert page.inner_text("#kpi-cost") == money(ref["cost"], "USD")
    assert page.inner_text("#kpi-card-hours") == f"{ref['card_hours']:,.1f}"
    assert page.inner_text("#kpi-idle-cost") == money(ref["idle_cost"], "USD")
    first = page.locator("#team-page > *").first
    assert first.get_attribute("id") == "team-daily"  # the page leads with a picture
    page.screenshot(path=str(shots / "team.png"), full_page=True)
    for path, picture in (("/fleet", "fleet-heatmap"), ("/queues", "queue-panels"), ("/plans", "plans-chart")):
        page.click(f"#nav-{path.strip('/')}")
        page.wait_for_selector(f"#{picture} .main-svg")
        assert f"period={PERIOD}" in page.url  # links carry the filter state
        # a picture first (Fleet: its waste headline, then the picture)
        first = page.locator(f"#{path.strip('/')}-page > *").first.get_attribute("id")
        assert first in (picture, None, "fleet-waste")
        if path == "/fleet":
            fleet_cost = reference_bills[(PERIOD, ("team",))].fleet_cost
            assert page.inner_text("#kpi-fleet-cost") == money(fleet_cost, "USD")
        page.screenshot(path=str(shots / f"{path.strip('/')}.png"), full_page=True)
    assert sorted(p.name for p in shots.iterdir()) == ["fleet.png", "plans.png", "queues.png", "team.png"]
    print(f"screenshots in {shots}")


def test_heatmap_click_drills_into_node(server: RunningServer, open_page: Any) -> None:
    page = open_page(admin_headers())
    goto(page, f"{server.url}/fleet?period={PERIOD}")
    page.wait_for_selector("#fleet-heatmap .nsewdrag")
    page.click("#fleet-heatmap .nsewdrag")
    page.wait_for_url(re.compile(r"node="))
    page.wait_for_function("() => document.querySelector('#fleet-heatmap .gtitle')?.textContent"
                           ".includes('per GPU and hour on')")
    node = re.search(r"node=([^&]+)", page.url)
    assert node is not None and node.group(1) in (page.locator("#fleet-heatmap .gtitle").text_content() or "")
    page.click("#all-nodes")
    page.wait_for_function("() => !location.search.includes('node=')")


def test_model_filter_goes_to_url(server: RunningServer, open_page: Any, reference_bills: dict) -> None:
    page = open_page(lead_headers())
    goto(page, f"{server.url}/team?period={PERIOD}")
    page.wait_for_selector("#kpi-cost")
    lines = reference_bills[(PERIOD, ("team", "model"))].lines.filter(pl.col("team") == LEAD_TEAM)
    model = lines.sort("cost", descending=True)["model"][0]
    ref = bill_line(reference_bills, PERIOD, ("team", "model"), team=LEAD_TEAM, model=model)
    page.click("#f-model")
    page.get_by_role("option", name=model, exact=True).click()
    page.wait_for_url(re.compile(f"model={re.escape(model)}"))
    page.wait_for_function(
        "([id, want]) => document.getElementById(id)?.innerText === want", arg=["kpi-cost", money(ref["cost"], "USD")]
    )
    assert f"team={LEAD_TEAM}" not in page.url or LEAD_TEAM in page.url
    fresh = open_page(lead_headers())
    goto(fresh, page.url)
    fresh.wait_for_function(
        "([id, want]) => document.getElementById(id)?.innerText === want", arg=["kpi-cost", money(ref["cost"], "USD")]
    )
    fresh.wait_for_selector("#team-daily .legend")
    assert model in (fresh.locator("#team-daily .legend").text_content() or "")
    assert model in fresh.inner_text("#f-model")


def test_admin_approves_plan(server: RunningServer, open_page: Any, shots: Path) -> None:
    page = open_page(admin_headers())
    goto(page, f"{server.url}/plans?plan={MIG_PLAN}")
    page.wait_for_selector("#plan-status")
    assert page.inner_text("#plan-status") == "proposed"
    page.click("#btn-approve")
    page.wait_for_selector("#flash-message")
    assert "approved by ada" in page.inner_text("#flash"), page.inner_text("#flash")
    page.wait_for_function("() => document.getElementById('plan-status')?.innerText === 'approved'")
    assert "approved by ada" in page.inner_text("#flash")
    assert "plan.status" in page.inner_text("#plan-audit-table")
    page.screenshot(path=str(shots / "plans-approved.png"), full_page=True)
    # the warehouse itself, through the store's writer: its background refresh may be publishing
    # the serving store with the one write connection this process may hold
    with server.app.store.writer(refresh=False) as wh:
        assert load_record(wh, MIG_PLAN).status == "approved"


def test_lead_is_refused(server: RunningServer, open_page: Any) -> None:
    page = open_page(lead_headers())
    goto(page, f"{server.url}/plans")
    assert "may not see plans" in page.inner_text("#refusal")
    goto(page, f"{server.url}/team?period={PERIOD}&team={OTHER_TEAM}")
    assert OTHER_TEAM in page.inner_text("#refusal")
    assert page.locator("#kpi-cost").count() == 0
    key = next(k for k in server.app.dash.callback_map if "flash.children" in k)
    body = {
        "output": key,
        "outputs": [{"id": "flash", "property": "children"}, {"id": "bump", "property": "data"}],
        "inputs": [{"id": b, "property": "n_clicks", "value": 1 if b == "btn-reject" else None}
                   for b in ("btn-approve", "btn-reject", "btn-preview", "btn-apply")],
        "state": [{"id": "reject-reason", "property": "value", "value": "because"},
                  {"id": "plan-id", "property": "data", "value": "quota-test-1"},
                  {"id": "bump", "property": "data", "value": 0}],
        "changedPropIds": ["btn-reject.n_clicks"],
    }
    answer = page.evaluate(
        "async (body) => { const r = await fetch('/_dash-update-component', {method: 'POST',"
        " headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});"
        " return [r.status, await r.text()]; }", body)
    assert answer[0] == 200 and "Refused" in answer[1] and "needs the admin role" in json.loads(answer[1]).__str__()
    server.app.actions.wait()  # the refusal's audit record is written in the background
    with server.app.store.writer(refresh=False) as wh:  # (as above: the warehouse itself)
        assert load_record(wh, "quota-test-1").status == "proposed"
    csv = page.request.get(f"{server.url}/download/bill.csv?period={PERIOD}&team={OTHER_TEAM}")
    assert csv.status == 403


def test_production_mode_without_proxy(server: RunningServer, open_page: Any, demo_source: Path,
                                       tmp_path: Path) -> None:
    page = open_page(None)
    assert page.goto(f"{server.url}/team").status == 401
    app = create_app(settings_with_roles(proxy=("10.9.9.9",)), demo_source, background=False,
                     cache_dir=tmp_path / "cache")
    other = start_server(app, "127.0.0.1", 0)
    try:
        spoofed = open_page(admin_headers())
        response = spoofed.goto(f"{other.url}/team")
        assert response.status == 401
        assert "X-Forwarded-User header from a trusted proxy" in spoofed.inner_text("body")
    finally:
        other.stop()
