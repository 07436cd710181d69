"""Numbers people act on (issue 32), in real Chromium on a fresh `gpuledger demo --no-serve`
then the dashboard served on its warehouse (what `gpuledger serve` runs: `create_app` +
`start_server`).

Cases:
- the demo computes everything it shows: nowhere on the Teams or Fleet page does "not computed
  yet" appear, and the Teams headline's saving is not "$0.00";
- the Teams grid marks the over-budget team's budget cells (the lead's team, past 400.00);
- one saving figure everywhere: the Teams headline, the sum of the Teams rows' savings, the
  teams.csv download, `/api/v1/recommendations` and `gpuledger recommend -o json` (a separate
  process on the same file) give the same monthly saving, to the cent;
- advice worth reading: every row of the Fleet page's advice grid (read through AG Grid's own
  API) saves at least `advice.min_monthly_saving` a month or is a risk row (a pool past its
  overcommit knee), so no row of zero saving that asks nothing of anyone; they are
  exactly the rows `recommend --kind K -o json` lists for the Fleet kinds, and every row kind
  the CLI counted instead of listing appears as a counted line ("N Deployments already
  right-sized ...");
- no zero where the value is unknown, no row of zero saving on Fleet: every advice row's saving
  cell, as AG Grid formats it, is money above $0.00 or "not priced" (a risk row, whose saving
  is null in the CLI's JSON too), and "$0.00" appears nowhere in the grid; the summary states
  the listed rows' saving, the sum computed here from the grid's rows;
- the demo's data is simulated and complete: no "Stale" banner on any page, the banner says
  "Simulated data to ..."; an admin's "My team" link opens the fleet view;
- screenshots of Teams, Fleet, Plans and Capacity at 1280 and 1440 px wide (full page), written to
  `$GPULEDGER_SCREENSHOTS` when set (else the test's folder): PNGs of that width.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.dashboards.serving_results import FLEET_KINDS
from tests.dashboards.conftest import admin_headers, settings_with_roles
from tests.dashboards.test_api import get

PERIOD = "2026-11"
REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.browser, pytest.mark.timeout(3600)]  # the demo runs a month


def _gpuledger(*argv: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "gpuledger", *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=3600, check=False)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("numbers")
    _gpuledger("demo", "--gpus", "40", "--period", PERIOD, "--no-serve", "--out", str(folder / "demo"),
               cwd=folder)
    path = folder / "demo" / "gpuledger.duckdb"
    cli = {"recommend": json.loads(_gpuledger("--warehouse", str(path), "recommend", "--period", PERIOD,
                                              "-o", "json", cwd=folder)),
           "advice": json.loads(_gpuledger("--warehouse", str(path), "recommend", "--period", PERIOD,
                                           *(f"--kind={k}" for k in FLEET_KINDS), "--top", "1000", "-o", "json",
                                           cwd=folder))}
    running = start_server(create_app(settings_with_roles(), path, cache_dir=folder / "cache"), "127.0.0.1", 0)
    yield running, cli
    running.stop()


def _text(page: Any) -> str:
    return str(page.locator("#page-content, body").first.inner_text())


def test_one_saving_everywhere_and_none_unknown(demo: tuple[RunningServer, dict], open_page: Any) -> None:
    server, cli = demo
    page = open_page(admin_headers())
    page.goto(f"{server.url}/teams?period={PERIOD}")
    page.wait_for_selector("#teams-headline")
    headline = page.locator("#teams-headline").inner_text()
    assert "not computed" not in _text(page) and "$0.00 per month" not in headline, headline
    shown = float(page.get_attribute("#teams-saving", "data-value") or "nan")
    from tests.dashboards.conftest import LEAD_TEAM
    from tests.dashboards.test_teams_browser import grid_rows, over_budget_cells

    rows = [float(r["saving"]) for r in grid_rows(page) if r["saving"] is not None]
    lead = next(r for r in grid_rows(page) if r["team"] == LEAD_TEAM)
    assert lead["cost"] > 400.0  # a month of the demo: past the 400.00 budget (conftest), marked
    assert over_budget_cells(page) == {("budget_used", LEAD_TEAM), ("forecast", LEAD_TEAM)}
    status, api = get(server, f"/api/v1/recommendations?period={PERIOD}", admin_headers())
    assert status == 200 and api["computed"] is True
    body = page.request.get(f"{server.url}/download/teams.csv?period={PERIOD}").text()
    savings = [r["saving"] for r in csv.DictReader(io.StringIO(body)) if r["saving"]]
    assert all(len(s.partition(".")[2]) <= 2 for s in savings), savings  # cents, no float noise
    total = cli["recommend"]["monthly_saving"]
    figures = {"headline": shown, "rows": sum(rows), "api": api["monthly_saving"], "cli": total}
    assert total > 0, figures
    assert {round(v, 2) for v in figures.values()} == {round(total, 2)}, figures
    assert sum(map(float, savings)) == pytest.approx(total, abs=0.005 * len(savings) + 0.005)  # cents per row


def _grid_rows(page: Any, name: str) -> list[dict[str, Any]]:
    """The grid's rows, each with `shown`: its saving cell's text as AG Grid formats it."""
    rows: list[dict[str, Any]] = page.evaluate(
        """async (name) => {
            const api = await dash_ag_grid.getApiAsync(name + "-grid");
            const out = [];
            api.forEachNode(n => out.push({...n.data, shown: api.getCellValue(
                {rowNode: n, colKey: "monthly_saving", useFormatter: true})}));
            return out;
        }""", name)
    return rows


def test_fleet_lists_only_actionable_advice(demo: tuple[RunningServer, dict], open_page: Any) -> None:
    server, cli = demo
    page = open_page(admin_headers())
    page.goto(f"{server.url}/fleet?period={PERIOD}")
    page.wait_for_selector("#fleet-advice", timeout=300_000)
    assert "not computed" not in _text(page)
    floor = settings_with_roles().advice.min_monthly_saving
    rows = _grid_rows(page, "fleet-advice-table")
    assert rows, "the demo fleet gives advice worth acting on"
    from gpuledger.analytics.advice.actionable import RISK_KINDS, UNPRICED

    # not priced: a risk (a pool past its knee), or a MIG rebuild, which the MIG plan prices
    # by the GPUs it frees (decision 0230: one action, one saving)
    unknown = [r for r in rows if r["monthly_saving"] is None]
    assert all((r["kind"] in RISK_KINDS or r["kind"] in UNPRICED) and r["shown"] == "not priced"
               for r in unknown), unknown
    assert "fragmentation_rebuild" in {r["kind"] for r in unknown}  # the demo's fragmented MIG node
    priced = [r for r in rows if r["monthly_saving"] is not None]
    low = [r for r in priced if float(r["monthly_saving"]) < floor]
    assert not low, low  # no row of zero saving; a risk row (a pool past its knee) says "not priced"
    assert not [r for r in rows if "0.00" in str(r["shown"]) and str(r["shown"]).lstrip("-$") == "0.00"]
    assert "$0.00" not in page.locator("#fleet-advice-table").inner_text()
    listed = sorted((r["kind"], r["scope"], None if r["monthly_saving"] is None else round(float(r["monthly_saving"]), 2))
                    for r in rows)
    want = sorted((r["kind"], r["scope"], None if r["monthly_saving"] is None else round(float(r["monthly_saving"]), 2))
                  for r in cli["advice"]["recommendations"])
    assert listed == want
    summary = float(page.get_attribute("#fleet-advice-table-summary", "data-value") or "nan")
    assert summary == pytest.approx(sum(float(r["monthly_saving"]) for r in priced), abs=0.005)
    assert round(summary, 2) == round(cli["advice"]["monthly_saving"], 2)  # the CLI states the same sum
    counted = page.locator("#fleet-advice .quiet").all_inner_texts()
    for quiet in cli["advice"]["below_floor"]:
        assert any(f"{quiet['count']:,} {quiet['label']}" in line for line in counted), (quiet, counted)


def test_simulated_data_is_not_stale_and_admin_lands_on_fleet(demo: tuple[RunningServer, dict],
                                                               open_page: Any) -> None:
    server, _ = demo
    page = open_page(admin_headers())
    for name, ready in (("teams", "#teams-headline"), ("fleet", "#fleet-advice"), ("plans", "#plans-page"),
                        ("capacity", "#capacity-page")):
        page.goto(f"{server.url}/{name}?period={PERIOD}")
        page.wait_for_selector(ready, timeout=300_000)
        page.wait_for_selector("#simulated-note")
        banner = page.locator("#banner").inner_text()
        assert "Simulated data to" in banner and "Stale" not in banner, (name, banner)
        assert page.locator("#stale-warning").count() == 0
    page.goto(f"{server.url}/teams?period={PERIOD}")
    page.wait_for_selector("#teams-headline")
    page.wait_for_function("() => document.getElementById('nav-team')?.getAttribute('href')?.startsWith('/fleet')")
    page.click("#nav-team")
    page.wait_for_selector("#fleet-advice", timeout=300_000)
    assert "/fleet" in page.url


@pytest.mark.parametrize("width", [1280, 1440])
def test_screenshots(demo: tuple[RunningServer, dict], open_page: Any, width: int, tmp_path: Path) -> None:
    server, _ = demo
    folder = Path(os.environ.get("GPULEDGER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page = open_page(admin_headers())
    page.set_viewport_size({"width": width, "height": 900})
    for name, ready in (("teams", "#teams-headline"), ("fleet", "#fleet-advice"), ("plans", "#plans-page"),
                        ("capacity", "#capacity-page")):
        page.goto(f"{server.url}/{name}?period={PERIOD}")
        page.wait_for_selector(ready, timeout=300_000)
        page.wait_for_load_state("networkidle")
        shot = folder / f"{name}-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == width
        assert page.evaluate(_CUT_CELLS) == [], name  # every grid cell whole, none ending in "…"


_CUT_CELLS = """() => [...document.querySelectorAll('.ag-root .ag-cell-value')]
    .filter(value => value.scrollWidth > value.clientWidth + 1)
    .map(value => value.closest('.ag-cell').getAttribute('col-id') + ': ' + value.textContent)"""
"""The grid cells whose text is cut at the cell's edge (a hand check at 1280 px found the
Teams grid's "sharing_discount" and "$3,911.18 funding" cut)."""
