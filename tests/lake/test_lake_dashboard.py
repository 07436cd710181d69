"""`serve --lake`: the dashboard in lake mode, in a real headless Chromium (Playwright).

Cases:
- an admin lands on Teams: one row per (cluster, team) of the lake; each cluster's subtotal
  equals the sum of that cluster's lines of `gpuledger org bill --by cluster,team -o json` (run
  as a subprocess) to the cent, each row its line, and the org total the JSON's fleet cost;
- the cluster selector narrows the table to one cluster;
- the Fleet by cluster page (/org) shows each cluster's fleet cost as that cluster's own bill,
  computed from its warehouse (not the lake), to the cent;
- pages that need a warehouse (/plans, /team) say they are not available in lake mode;
- a lead sees only their team's rows (in every cluster), no subtotals, and is refused /org.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuledger.analytics.billing.money import to_cents
from gpuledger.dashboards.app import RunningServer, start_server
from gpuledger.dashboards.lake_app import create_lake_app
from gpuledger.warehouse.lake.location import Lake
from tests.dashboards import conftest as dashboard_fixtures
from tests.dashboards.conftest import LEAD_TEAM, admin_headers, lead_headers, settings_with_roles
from tests.lake.fleets import CLUSTERS, PERIOD
from tests.lake.test_cli import gl

pytestmark = pytest.mark.browser
browser = dashboard_fixtures.browser  # the shared Chromium fixtures
open_page = dashboard_fixtures.open_page
READY = "#org-teams-page, #org-fleet-page, #lake-unavailable, #refusal, #error"


@pytest.fixture(scope="module")
def server(published_lake: Lake) -> Iterator[RunningServer]:
    running = start_server(create_lake_app(settings_with_roles(), published_lake.root), "127.0.0.1", 0)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def org_json(published_lake: Lake) -> dict[str, Any]:
    out = gl("org", "bill", "--lake", published_lake.root, "--period", PERIOD, "--by", "cluster,team",
             "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _cents(page: Any, selector: str) -> dict[tuple[str, ...], int]:
    out = {}
    for row in page.locator(selector).all():
        team = row.get_attribute("data-team")
        key = (row.get_attribute("data-cluster"), *([team] if team else []))
        cell = row.locator("td[data-col=cost], td[data-col=fleet_cost]")
        out[key] = to_cents(float(cell.get_attribute("data-value")))
    return out


def test_admin_teams_by_cluster_match_org_bill(server: RunningServer, open_page: Any, org_json: dict) -> None:
    page = open_page(admin_headers())
    page.goto(f"{server.url}/")
    page.wait_for_selector("#org-teams-table tbody tr")
    expected_rows = {(r["cluster"], r["team"]): to_cents(r["cost"]) for r in org_json["lines"]}
    per_cluster: dict[str, int] = defaultdict(int)
    for (cluster, _team), cents in expected_rows.items():
        per_cluster[cluster] += cents
    assert _cents(page, "#org-teams-table tbody tr[data-team]") == expected_rows
    subtotals = _cents(page, "#org-teams-table tr.subtotal")
    assert subtotals == {(c,): v for c, v in per_cluster.items()} and len(subtotals) == len(CLUSTERS)
    total = page.locator("#org-total")
    assert to_cents(float(total.get_attribute("data-value"))) == to_cents(org_json["fleet_cost"])
    # the cluster selector: one cluster's rows only
    page.locator("#f-cluster").click()
    page.locator(".Select-menu-outer, [role=listbox]").get_by_text("west", exact=True).click()
    page.wait_for_function("document.querySelectorAll('#org-teams-table tr.subtotal').length === 1")
    assert _cents(page, "#org-teams-table tr.subtotal") == {("west",): per_cluster["west"]}
    assert page.locator("#org-total").count() == 0


def test_fleet_by_cluster_and_unavailable_pages(server: RunningServer, open_page: Any, reference_bills) -> None:
    page = open_page(admin_headers())
    page.goto(f"{server.url}/org")
    page.wait_for_selector("#org-fleet-table tbody tr")
    own = {(c.name,): to_cents(reference_bills[(c.name, ("team",))].fleet_cost) for c in CLUSTERS}
    assert _cents(page, "#org-fleet-table tbody tr") == own
    total = page.locator("#org-fleet-total").get_attribute("data-value")
    assert to_cents(float(total)) == sum(own.values())
    for path in ("/plans", "/team"):
        page.goto(f"{server.url}{path}")
        page.wait_for_selector(READY)
        assert "not available in lake mode" in page.locator("#lake-unavailable").inner_text()


def test_lead_sees_own_rows_only(server: RunningServer, open_page: Any, org_json: dict) -> None:
    page = open_page(lead_headers())
    page.goto(f"{server.url}/teams")
    page.wait_for_selector("#org-teams-table tbody tr")
    mine = {(r["cluster"], r["team"]): to_cents(r["cost"]) for r in org_json["lines"]
            if r["team"] == LEAD_TEAM}
    assert len(mine) == len(CLUSTERS)
    assert _cents(page, "#org-teams-table tbody tr[data-team]") == mine
    assert page.locator("tr.subtotal").count() == 0 and page.locator("#org-total").count() == 0
    assert page.locator("#nav-org").is_hidden()
    page.goto(f"{server.url}/org")
    page.wait_for_selector(READY)
    assert "may not see the fleet by cluster" in page.locator("#refusal").inner_text()


def test_serve_lake_refuses_warehouse_flags(published_lake: Lake, tmp_path: Path) -> None:
    out = gl("serve", "--lake", published_lake.root, "--schedule", "--dev-user", "ada")
    assert out.returncode != 0 and "--schedule needs a cluster's warehouse" in out.stderr
    assert "Traceback" not in out.stderr
