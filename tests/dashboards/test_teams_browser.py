"""The Teams page in a real headless Chromium (Debian's chromium driven by Playwright).

Cases:
- an admin lands on Teams at `/`; every billed team has a row whose cost is the team's line of
  `compute_bill` (computed on the original file, not through the app) to the cent, the special
  lines follow, and the total cell equals the fleet cost;
- the CSV download (same session) has the same rows and costs as the page, with currency and
  period columns;
- the table is a data grid (AG Grid, as the advice): clicking the idle cost header sorts the
  rows by it, highest first, again lowest first (read through the grid's own API);
- every cell reads as people read it (money, GPU-hours with one decimal, shares as percentages),
  checked against the row's unrounded numbers formatted here;
- an over-budget team's budget cells carry the over-budget mark (the lead's team, past 400.00);
- a lead lands on their own team page at `/`, sees exactly one row on Teams and no total, and
  their CSV holds only that row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.dashboards.pages.common import money
from tests.dashboards.conftest import LEAD_TEAM, PERIOD, admin_headers, lead_headers, settings_with_roles
from tests.dashboards.test_browser import PAGE_READY

pytestmark = pytest.mark.browser


def serve_demo_copy(tmp_path_factory: pytest.TempPathFactory, demo_source: Path, name: str) -> Iterator[RunningServer]:
    """The dashboard with roles on a copy of the demo warehouse (a module's own: pages may publish)."""
    import shutil

    folder = tmp_path_factory.mktemp(name)
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    running = start_server(create_app(settings_with_roles(), path, cache_dir=folder / "cache"), "127.0.0.1", 0)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[RunningServer]:
    yield from serve_demo_copy(tmp_path_factory, demo_source, "teams-browser")


GRID_ROWS = """async ([name, sorted]) => {
    const api = await dash_ag_grid.getApiAsync(name + "-grid");
    const out = [];
    const shown = n => Object.fromEntries(api.getColumns().map(c => [c.getColId(),
        api.getCellValue({rowNode: n, colKey: c.getColId(), useFormatter: true})]));
    (sorted ? api.forEachNodeAfterFilterAndSort.bind(api) : api.forEachNode.bind(api))(
        n => out.push({...n.data, shown: shown(n)}));
    return out;
}"""


def grid_rows(page: Any, sorted_: bool = False) -> list[dict[str, Any]]:
    """The Teams grid's rows (unrounded numbers), in the order given or as sorted on screen."""
    page.wait_for_selector("#teams-table .ag-row")
    rows: list[dict[str, Any]] = page.evaluate(GRID_ROWS, ["teams-table", sorted_])
    return rows


def over_budget_cells(page: Any) -> set[tuple[str, str]]:
    """(column, team) of every cell the grid marks over budget."""
    marked = page.locator("#teams-table .ag-cell.over-budget").evaluate_all(
        "cells => cells.map(c => [c.getAttribute('col-id'), c.closest('.ag-row').getAttribute('row-index')])")
    rows = grid_rows(page)
    return {(str(col), str(rows[int(i)]["team"])) for col, i in marked}


def _rows(page: Any) -> dict[str, float]:
    """team → the unrounded cost the grid's row carries."""
    return {str(r["team"]): float(r["cost"]) for r in grid_rows(page)}


def _csv(page: Any, url: str) -> list[dict[str, str]]:
    answer = page.request.get(url)
    assert answer.status == 200, answer.text()
    return list(csv.DictReader(io.StringIO(answer.text())))


def test_admin_sees_every_team_reconciled(server: RunningServer, open_page: Any, reference_bills: dict) -> None:
    bill = reference_bills[(PERIOD, ("team",))]
    expected = {t: round(c, 2) for t, c in bill.lines.group_by("team").agg(pl.col("cost").sum()).iter_rows()}
    page = open_page(admin_headers())
    page.goto(f"{server.url}/?period={PERIOD}")
    page.wait_for_selector("#teams-table .ag-row")
    assert "/teams" in page.url or page.locator("#teams-page").count() == 1  # admins land on Teams
    shown = _rows(page)
    teams = {t for t in expected if t not in SPECIAL_LINES}
    assert teams <= set(shown) and len(teams) >= 3
    assert set(shown) == set(expected)
    for team, cost in expected.items():
        assert round(shown[team], 2) == cost, team
    total = page.locator("#teams-total")
    assert round(float(total.get_attribute("data-value")), 2) == round(bill.fleet_cost, 2)
    assert round(sum(shown.values()), 2) == round(bill.fleet_cost, 2)
    order = [r["team"] for r in grid_rows(page)]
    assert order[-len([t for t in expected if t in SPECIAL_LINES]):] == [
        t for t in SPECIAL_LINES if t in expected]  # the special lines follow the teams
    rows = _csv(page, f"{server.url}/download/teams.csv?period={PERIOD}")
    assert {r["team"]: round(float(r["cost"]), 2) for r in rows} == {t: round(c, 2) for t, c in shown.items()}
    assert {r["currency"] for r in rows} == {"USD"} and {r["period"] for r in rows} == {PERIOD}
    link = page.locator("#teams-table a", has_text=LEAD_TEAM).first
    assert link.get_attribute("href") == f"/team?period={PERIOD}&team={LEAD_TEAM}"
    # only the lead's team has a budget (400.00, conftest): its cells are marked when it spent, or
    # is forecast to spend, past it; no other team's ever
    lead = next(r for r in grid_rows(page) if r["team"] == LEAD_TEAM)
    over = lead["budget_used"] > 1 or lead["forecast"] > 400.0
    assert any(r["team"] == "sharing_discount" and r["cost"] > 0 for r in grid_rows(page))
    for r in grid_rows(page):  # every cell as people read it, formatted here independently
        cells = r["shown"]
        funding = r["team"] == "sharing_discount"  # the platform funds the discounts: not a charge
        held_nothing = funding or r["team"] == "unallocated"  # "allocated but idle" does not apply
        assert cells["cost"] == money(r["cost"], "USD") + (" funding" if funding else "")
        assert cells["idle_cost"] == ("–" if held_nothing else money(r["idle_cost"], "USD")), cells
        assert cells["card_hours"] == ("–" if funding else f"{r['card_hours']:,.1f}"), cells
        assert cells["idle_share"] == (
            "–" if held_nothing or r["idle_share"] is None else f"{r['idle_share']:.1%}"), cells
        assert cells["budget_used"] == ("–" if r["budget_used"] is None else f"{r['budget_used']:.1%}"), cells
    assert any(r["team"] == "unallocated" and r["shown"]["idle_cost"] == "–" for r in grid_rows(page))
    assert over_budget_cells(page) == ({("budget_used", LEAD_TEAM), ("forecast", LEAD_TEAM)} if over else set())
    assert page.locator("#teams-daily .main-svg").count() >= 1  # the page leads with its chart


def test_cost_header_sorts(server: RunningServer, open_page: Any) -> None:
    page = open_page(admin_headers())
    page.goto(f"{server.url}/teams?period={PERIOD}")
    page.wait_for_selector("#teams-table .ag-row")
    header = "#teams-table .ag-header-cell[col-id=idle_cost] .ag-header-cell-label"
    page.click(header)
    page.wait_for_selector("#teams-table .ag-header-cell[col-id=idle_cost][aria-sort=descending]")
    # the platform's funding and the unallocated line idle nothing ("–", no value): sorted as the smallest
    values = [r["idle_cost"] for r in grid_rows(page, sorted_=True)]
    assert values[-2:] == [None, None] and None not in values[:-2]
    values = [float(v) for v in values[:-2]]
    assert values == sorted(values, reverse=True) and len(values) > 3
    page.click(header)
    page.wait_for_selector("#teams-table .ag-header-cell[col-id=idle_cost][aria-sort=ascending]")
    again = [r["idle_cost"] for r in grid_rows(page, sorted_=True)]
    assert again[:2] == [None, None]
    assert [float(v) for v in again[2:]] == sorted(float(v) for v in again[2:])


def test_lead_sees_one_row(server: RunningServer, open_page: Any, reference_bills: dict) -> None:
    bill = reference_bills[(PERIOD, ("team",))]
    page = open_page(lead_headers())
    page.goto(f"{server.url}/")
    page.wait_for_selector(PAGE_READY)
    assert page.locator("#team-page").count() == 1  # a lead lands on their own team
    page.goto(f"{server.url}/teams?period={PERIOD}")
    shown = _rows(page)
    line = float(bill.lines.filter(pl.col("team") == LEAD_TEAM)["cost"].sum())
    assert list(shown) == [LEAD_TEAM] and round(shown[LEAD_TEAM], 2) == round(line, 2)
    assert page.locator("#teams-total").count() == 0
    rows = _csv(page, f"{server.url}/download/teams.csv?period={PERIOD}")
    assert [r["team"] for r in rows] == [LEAD_TEAM]
