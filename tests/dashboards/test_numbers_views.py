"""Numbers people act on, issue 32's leftovers, without a browser.

Cases:
- `money()` follows the currency's decimals (CLDR through `core.money`: USD 2, JPY 0, BHD 3),
  never "-0.00"; `number()` prints a count (an int) whole and a quantity with its decimals;
- a quota plan's team rows read "unchanged" where a team's whole-GPU quota stays (not
  "14 → 14 +0"), on `plans show` (the CLI text) and the Plans page alike (one `team_rows`);
- the Plans page's change and team tables are data grids (AG Grid), filterable and sortable;
- `ReadModel.missing` on a serving store opens no reader of its own once the result's view
  read the stored result (a counting wrapper around the store's own `reader`): with the results
  stored it answers None, without them "not computed yet";
- the advice grid's summary states the listed rows' saving (the below-floor rows' negative
  catalog saving is not in it), and a risk row's unknown saving reads "not priced", never 0.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from gpuledger.dashboards.pages.common import money, number
from tests.dashboards.conftest import PERIOD, settings_with_roles, store_results


@pytest.mark.parametrize(("value", "currency", "text"), [
    (12345.678, "USD", "$12,345.68"), (12345.678, "JPY", "¥12,346"), (1.23456, "BHD", "1.235 BHD"),
    (-0.001, "USD", "$0.00"), (-2.5, "EUR", "-€2.50"), (None, "USD", "–"),
])
def test_money_at_the_currency_decimals(value: float | None, currency: str, text: str) -> None:
    assert money(value, currency) == text


def test_counts_are_whole() -> None:
    assert (number(3), number(1234), number(3.0), number(2.25, 2)) == ("3", "1,234", "3.0", "2.25")


def _evaluation() -> Any:
    from gpuledger.optimizer.plan.evaluation import Evaluation, TeamChange

    teams = (TeamChange(team="nlp", gpus_before=14, gpus_after=14, floor_gpus=4, pending_before=900,
                        pending_after=600, demand=3000),
             TeamChange(team="vision", gpus_before=6, gpus_after=8, floor_gpus=2, pending_before=300,
                        pending_after=0, demand=1000))
    return Evaluation(method="rolling origin", teams=teams, headline="h", reason="r")


def test_unchanged_team_quota_reads_unchanged() -> None:
    from gpuledger.dashboards.pages.plans import evaluation_parts
    from gpuledger.optimizer.plan.render import render_evaluation

    e = _evaluation()
    text = render_evaluation(e)
    nlp = next(line for line in text.splitlines() if line.strip().startswith("nlp"))
    assert "unchanged" in nlp and "→ 14" not in nlp and "+0" not in nlp
    vision = next(line for line in text.splitlines() if line.strip().startswith("vision"))
    assert "6 → 8" in vision and "+2" in vision

    class Plan:
        evaluation = e

    _, teams = evaluation_parts(Plan())
    assert teams is not None
    rows = {r["team"]: r for r in teams.to_dicts()}
    assert (rows["nlp"]["gpus"], rows["nlp"]["change"]) == ("14", "unchanged")
    assert (rows["vision"]["gpus"], rows["vision"]["change"]) == ("6 → 8", "+2")


def _components(node: Any) -> Iterator[Any]:
    yield node
    children = getattr(node, "children", None)
    for child in children if isinstance(children, list | tuple) else [children]:
        if child is not None and hasattr(child, "to_plotly_json"):
            yield from _components(child)


def test_plan_tables_are_grids(shared_app: Any) -> None:
    from dash_ag_grid import AgGrid

    from gpuledger.core.access import resolve_roles
    from gpuledger.dashboards.pages import plans
    from gpuledger.dashboards.pages.common import PageContext
    from gpuledger.dashboards.state import ViewState
    from tests.dashboards.conftest import ADMIN, MIG_PLAN

    admin = resolve_roles(ADMIN, ("platform-admins",), shared_app.settings.access)
    ctx = PageContext(admin, ViewState(period=PERIOD, plan=MIG_PLAN), shared_app.data, shared_app.settings,
                      shared_app.actions)
    page = plans.render(plans.view(ctx, shared_app.actions))
    grids = {c.id: c for c in _components(page) if isinstance(c, AgGrid)}
    assert "diff-table-grid" in grids
    diff = grids["diff-table-grid"]
    assert [d["field"] for d in diff.columnDefs] == ["object", "what", "before", "after", "note"]
    assert diff.defaultColDef["sortable"] and all("filter" in d for d in diff.columnDefs)
    assert len(diff.rowData) == 1 and diff.rowData[0]["object"] == "a100-mig-000 / GPU 0"


class _Counting:
    """The store's own `reader`, counted (a real reader is opened every time)."""

    def __init__(self, store: Any) -> None:
        self.store, self.real, self.opened = store, store.reader, 0

    def __call__(self, *args: Any, **kwargs: Any) -> AbstractContextManager[Any]:
        self.opened += 1
        return self.real(*args, **kwargs)


@pytest.mark.parametrize("results", [True, False])
def test_missing_reuses_the_views_read(demo_source: Path, tmp_path: Path, results: bool) -> None:
    from gpuledger.dashboards.app import create_app
    from gpuledger.dashboards.serving_results import NOT_COMPUTED, RECOMMENDATIONS, publish_serving
    from gpuledger.warehouse import Warehouse

    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    if results:
        store_results(path)
    else:
        with Warehouse.open(path, read_only=True) as wh:
            publish_serving(wh, settings_with_roles())
    app = create_app(settings_with_roles(), path, background=False, cache_dir=tmp_path / "cache")
    try:
        assert not app.data.serving().owned  # a serving store: the question is asked there
        counting = _Counting(app.store)
        app.store.reader = counting  # type: ignore[method-assign]
        frame = app.data.recommendations(PERIOD)
        read = counting.opened
        assert read >= 1
        assert app.data.missing(RECOMMENDATIONS, PERIOD) == (None if results else NOT_COMPUTED)
        assert counting.opened == read  # no second reader for the same stored result
        assert (frame.height > 0) is results
    finally:
        app.close()


def test_advice_summary_sums_the_listed_rows() -> None:
    from dash import html

    from gpuledger.analytics.advice.actionable import split
    from gpuledger.dashboards.pages import advice_panels

    rows = [
        {"kind": "autoscaling", "scope": "serve/chat", "current": "8", "recommended": "2-8",
         "monthly_saving": 3170.29, "reason": "r"},  # a rebuild is never priced here (0230)
        {"kind": "profile_catalog", "scope": "H100", "current": "-", "recommended": "-",
         "monthly_saving": 291.45, "reason": "r"},
        {"kind": "profile_catalog", "scope": "A100", "current": "-", "recommended": "-",
         "monthly_saving": -84.10, "reason": "r"},  # the catalog would cost money: below the floor
        {"kind": "overcommit_past_knee", "scope": "pool-b (inference)", "current": "1:5.2",
         "recommended": "1:4", "monthly_saving": None, "reason": "r"},
    ]
    shown = split(rows, 1.0)
    assert shown.total == pytest.approx(3170.29 + 291.45)  # not + (-84.10), not the risk's unknown
    import polars as pl

    v = advice_panels.AdviceView(PERIOD, "USD", pl.DataFrame(shown.rows, schema=advice_panels.ROW_SCHEMA),
                                 0.3, pl.DataFrame(), pl.DataFrame(), {}, total=shown.total, floor=1.0)
    div = advice_panels._rows_table(v, "fleet-advice-table")
    summary = next(c for c in _components(div) if isinstance(c, html.P) and c.id == "fleet-advice-table-summary")
    assert summary.children.startswith("3 worth acting on, together $3,461.74/month (1 not priced")
    grid = next(c for c in _components(div) if getattr(c, "id", None) == "fleet-advice-table-grid")
    saving = next(d for d in grid.columnDefs if d["field"] == "monthly_saving")
    assert "'not priced'" in saving["valueFormatter"]["function"].replace('"', "'")
    assert [r["monthly_saving"] for r in grid.rowData][-1] is None  # the risk: unknown, last
