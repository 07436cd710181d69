"""Fleet advice on the Fleet and Plans pages equals `recommend --kind ... -o json` (issue #19),
and an empty Fleet month says where data exists (issue #15).

Cases:
- the view: an empty month's Fleet page carries the where-data note; the data month does not;
- in real Chromium (Debian's chromium via Playwright), as an admin: the Fleet page's advice
  grid holds exactly the rows `gpuledger recommend --kind K --period P -o json` lists for
  every kind (kind, scope, recommended, saving to the cent), run as a separate process on the
  same warehouse; its per-node fragmentation rates are the JSON document's latest per node;
  the Plans page lists the catalog, overcommit and autoscaling rows the same way; every saving
  cell reads as the grid formats it (AG Grid's own formatter): money, or "not priced" for a
  risk row (a pool past its knee), whose saving is unknown (null in the JSON), never "$0.00".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuledger.core.access import resolve_roles
from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.dashboards.pages import fleet
from gpuledger.dashboards.pages.common import PageContext, money, percent
from gpuledger.dashboards.state import ViewState
from tests.dashboards.conftest import ADMIN, PERIOD, admin_headers, settings_with_roles, store_results

SETTINGS = settings_with_roles()
ADMIN_P = resolve_roles(ADMIN, ("platform-admins",), SETTINGS.access)
KINDS = ("profile-catalog", "fragmentation", "overcommit", "autoscaling")


def test_empty_fleet_month_says_where_data_is(shared_app: Any) -> None:
    empty = fleet.view(PageContext(ADMIN_P, ViewState(period="2026-08"), shared_app.data, shared_app.settings))
    assert empty.empty_note is not None and "2026-10 to 2026-11" in empty.empty_note
    full = fleet.view(PageContext(ADMIN_P, ViewState(period=PERIOD), shared_app.data, shared_app.settings))
    assert full.empty_note is None


def _cli(path: Path, kind: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(path), "recommend", "--kind", kind,
         "--period", PERIOD, "-o", "json"], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[tuple[RunningServer, dict]]:
    folder = tmp_path_factory.mktemp("dash-advice")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    documents = {kind: _cli(path, kind) for kind in KINDS}  # before the server holds the file
    app = create_app(settings_with_roles(), store_results(path), cache_dir=folder / "cache")
    running = start_server(app, "127.0.0.1", 0)
    yield running, documents
    running.stop()


def _cash(value: Any) -> str:
    """A saving as the page shows it: money, or "not priced" for a risk row's unknown saving."""
    return "not priced" if value is None else money(float(value), "USD")


def _expected(documents: dict[str, Any], kinds: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The rows the CLI lists (those worth acting on: `recommend --kind` leaves the rest counted)."""
    return sorted((r["kind"], r["scope"], r["recommended"], _cash(r["monthly_saving"]))
                  for k in kinds for r in documents[k]["recommendations"])


def _shown(page: Any, table: str) -> list[tuple[str, ...]]:
    """The advice grid's rows, read through AG Grid's own API (`dashboards.pages.grid`)."""
    if page.locator(f"#{table}.empty").count():
        return []
    rows = page.evaluate("""async (name) => {
        const api = await dash_ag_grid.getApiAsync(name + "-grid");
        const out = [];
        api.forEachNode(n => out.push({...n.data, shown: api.getCellValue(
            {rowNode: n, colKey: "monthly_saving", useFormatter: true})}));
        return out;
    }""", table)
    for r in rows:  # the cell's text, as the grid formats it: an unknown saving is never "$0.00"
        assert r["shown"] == _cash(r["monthly_saving"]), r
    return sorted((r["kind"], r["scope"], r["recommended"], str(r["shown"])) for r in rows)


@pytest.mark.browser
def test_pages_show_the_cli_advice(advised: tuple[RunningServer, dict], open_page: Any) -> None:
    server, documents = advised
    page = open_page(admin_headers())
    page.goto(f"{server.url}/fleet?period={PERIOD}")
    page.wait_for_selector("#fleet-advice", timeout=300_000)
    expected = _expected(documents, KINDS)
    assert expected, "the fixture fleet gives no advice at all: the comparison would be empty"
    assert _shown(page, "fleet-advice-table") == expected
    risks = [r for r in documents["overcommit"]["recommendations"] if r["kind"] == "overcommit_past_knee"]
    assert all(r["monthly_saving"] is None for r in risks)  # unknown in the JSON too, never 0.0
    nodes = documents["fragmentation"]["fragmentation"]["nodes"]
    latest: dict[str, tuple[str, float]] = {}
    for n in nodes:
        if n["node"] not in latest or n["ts"] > latest[n["node"]][0]:
            latest[n["node"]] = (n["ts"], float(n["rate"]))
    shown_rates = {}
    for row in page.locator("#fragmentation-nodes tbody tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        shown_rates[cells[0]] = cells[5]
    assert shown_rates == {node: percent(rate) for node, (_, rate) in latest.items()}
    assert float(page.get_attribute("#fragmentation-threshold", "data-value") or "nan") == pytest.approx(
        documents["fragmentation"]["fragmentation"]["threshold"])
    page.goto(f"{server.url}/plans?period={PERIOD}")
    page.wait_for_selector("#plans-advice", timeout=300_000)
    plans_kinds = ("profile-catalog", "overcommit", "autoscaling")
    want = _expected(documents, plans_kinds)
    assert (_shown(page, "plans-advice-table") if want else []) == want
