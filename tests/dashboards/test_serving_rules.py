"""Stored serving results carry their rules (docs/decisions/0150, issue 28).

The writer (`gpuledger refresh-serving`) and the dashboard may run under different settings. A
month result the writer stored (recommendations, token costs, advice kinds) records the rules it
was computed under; a page or API answer under other rules says so instead of showing it as
current.

Cases, on the demo warehouse refreshed under config A (the defaults: idle < 5 %):
- every stored result records A's fingerprint (computed here from A's settings, not read back
  from the code under test);
- served under A: no note, the API says `rules_current: true`;
- served under config B (idle < 15 %): the read model, the My team, Teams, Fleet and Plans pages
  and `/api/v1/recommendations` say "computed under other rules", naming A's and B's
  fingerprints and `gpuledger refresh-serving`; the Fleet page in Chromium shows the warning;
- a refresh under B recomputes every result (its basis holds the rules' fingerprint) and the
  note goes away under B (and appears under A);
- a store published before results recorded their rules (no `rules`/`rules_json` columns, a
  basis without the rules' fingerprint): its results read as "rules not recorded" and the next
  refresh adds the columns in place and recomputes them under the writer's rules.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dash import html

from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.dashboards import serving_results
from gpuledger.dashboards.app import create_app
from gpuledger.dashboards.pages import advice_panels, team, teams
from gpuledger.dashboards.pages.common import PageContext
from gpuledger.dashboards.state import ViewState
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.serving_store import open_serving, serving_path
from tests.dashboards.conftest import ADMIN, LEAD, PERIOD, settings_with_roles, store_results

A = settings_with_roles()
B = A.model_copy(update={"idle": A.idle.model_copy(update={"threshold": 0.15})})


def _principal(settings: Settings, user: str, groups: tuple[str, ...] = ()) -> Any:
    from gpuledger.core.access import resolve_roles

    return resolve_roles(user, groups, settings.access)


def _stored_rules(path: Path) -> dict[tuple[str, str], str | None]:
    serving = open_serving(path)
    try:
        rows = serving.con.execute("SELECT name, period, rules FROM serving_results").fetchall()
    finally:
        serving.close()
    return {(str(n), str(p)): r for n, p, r in rows}


@pytest.fixture(scope="module")
def refreshed_a(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Path:
    path = tmp_path_factory.mktemp("rules-a") / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    return store_results(path, A)


def _app(path: Path, settings: Settings, tmp_path: Path, name: str) -> Any:
    return create_app(settings, path, background=False, cache_dir=tmp_path / name)


def _text(component: Any) -> str:
    """Every string inside a Dash component tree."""
    if isinstance(component, str):
        return component
    children = getattr(component, "children", None)
    if children is None:
        return ""
    if isinstance(children, list | tuple):
        return " ".join(_text(c) for c in children)
    return _text(children)


def test_results_record_the_writers_rules(refreshed_a: Path) -> None:
    stored = _stored_rules(refreshed_a)
    assert {name for name, _ in stored} == set(serving_results.NAMES)
    assert set(stored.values()) == {Rules.of(A).fingerprint}
    assert Rules.of(A).fingerprint != Rules.of(B).fingerprint


def test_served_under_the_same_rules_no_note(refreshed_a: Path, tmp_path: Path) -> None:
    app = _app(refreshed_a, A, tmp_path, "a")
    try:
        for name in serving_results.NAMES:
            assert app.data.result_note(name, PERIOD) is None, name
        client = app.server.test_client()
        doc = client.get(f"/api/v1/recommendations?period={PERIOD}",
                         headers={"X-Forwarded-User": ADMIN, "X-Forwarded-Groups": "platform-admins"},
                         environ_base={"REMOTE_ADDR": "127.0.0.1"}).get_json()
        assert doc["rules_current"] is True and "rules_note" not in doc
        lead = PageContext(_principal(A, LEAD), ViewState(period=PERIOD), app.data, app.settings)
        assert team.view(lead).results_note is None
    finally:
        app.close()


def test_served_under_other_rules_says_so(refreshed_a: Path, tmp_path: Path) -> None:
    a, b = Rules.of(A).fingerprint, Rules.of(B).fingerprint
    app = _app(refreshed_a, B, tmp_path, "b")
    try:
        for name in serving_results.NAMES:
            note = app.data.result_note(name, PERIOD)
            assert note is not None and "computed under other rules" in note, name
            assert a in note and b in note and "refresh-serving" in note
        # the API: the stored recommendations, marked as not current
        client = app.server.test_client()
        answer = client.get(f"/api/v1/recommendations?period={PERIOD}",
                            headers={"X-Forwarded-User": ADMIN, "X-Forwarded-Groups": "platform-admins"},
                            environ_base={"REMOTE_ADDR": "127.0.0.1"})
        doc = answer.get_json()
        assert answer.status_code == 200 and doc["rules_current"] is False
        assert a in doc["rules_note"] and "refresh-serving" in doc["rules_note"]
        # the pages: a warning paragraph naming the stored rules
        admin = PageContext(_principal(B, ADMIN, ("platform-admins",)), ViewState(period=PERIOD),
                            app.data, app.settings)
        lead = PageContext(_principal(B, LEAD), ViewState(period=PERIOD), app.data, app.settings)
        rendered = {
            "team-results-rules": team.render(team.view(lead)),
            "teams-results-rules": teams.render(teams.view(admin)),
            "fleet-advice-rules": advice_panels.fleet_section(admin),
            "plans-advice-rules": advice_panels.plans_section(admin),
        }
        for id, page in rendered.items():
            (warning,) = _find(page, id)
            assert "computed under other rules" in _text(warning) and a in _text(warning), id
    finally:
        app.close()


def _find(component: Any, id: str) -> list[Any]:
    found = [component] if getattr(component, "id", None) == id else []
    children = getattr(component, "children", None)
    if isinstance(children, list | tuple):
        for child in children:
            found += _find(child, id)
    elif isinstance(children, html.Base):
        found += _find(children, id)
    return found


def test_refresh_under_new_rules_recomputes_every_result(refreshed_a: Path, tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(refreshed_a, path)
    shutil.copyfile(serving_path(refreshed_a), serving_path(path))
    with Warehouse.open(path, read_only=True) as wh:
        serving_results.refresh_serving(wh, B)
        assert len(serving_results.LAST_TIMINGS) == len(_stored_rules(path))  # every result again
    assert set(_stored_rules(path).values()) == {Rules.of(B).fingerprint}
    under_b, under_a = _app(path, B, tmp_path, "b"), _app(path, A, tmp_path, "a")
    try:
        assert under_b.data.result_note(serving_results.RECOMMENDATIONS, PERIOD) is None
        note = under_a.data.result_note(serving_results.RECOMMENDATIONS, PERIOD)
        assert note is not None and Rules.of(B).fingerprint in note
    finally:
        under_b.close()
        under_a.close()


def test_a_store_from_before_rules_were_recorded(refreshed_a: Path, tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(refreshed_a, path)
    store = serving_path(path)
    shutil.copyfile(serving_path(refreshed_a), store)
    con = duckdb.connect(str(store))
    try:  # the table as the previous release wrote it: no rules, a basis without their fingerprint
        con.execute("ALTER TABLE serving_results DROP COLUMN rules_json")
        con.execute("ALTER TABLE serving_results DROP COLUMN rules")
        # (the rules' fingerprint and the warehouse's creation, 0256, came later)
        con.execute(r"UPDATE serving_results SET basis = regexp_replace(basis, '\|[0-9a-f]{12}\|[^|]*$', '')")
    finally:
        con.close()
    app = _app(path, A, tmp_path, "old")
    try:
        note = app.data.result_note(serving_results.RECOMMENDATIONS, PERIOD)
        assert note is not None and "rules not recorded" in note
        assert app.data.recommendations(PERIOD).height > 0  # still shown, with the note
    finally:
        app.close()
    with Warehouse.open(path, read_only=True) as wh:  # the next refresh adds the columns in place
        serving_results.refresh_serving(wh, A)
    assert set(_stored_rules(path).values()) == {Rules.of(A).fingerprint}


@pytest.mark.browser
def test_the_fleet_page_in_a_browser_says_other_rules(refreshed_a: Path, tmp_path: Path, open_page: Any) -> None:
    """The warning reaches a real page: the Fleet page served under B, in Chromium."""
    from gpuledger.dashboards.app import start_server
    from tests.dashboards.conftest import admin_headers

    running = start_server(_app(refreshed_a, B, tmp_path, "browser"), "127.0.0.1", 0)
    try:
        page = open_page(admin_headers())
        page.goto(f"{running.url}/fleet?period={PERIOD}")
        warning = page.wait_for_selector("#fleet-advice-rules")
        assert warning is not None
        text = warning.inner_text()
        assert "computed under other rules" in text and Rules.of(A).fingerprint in text
    finally:
        running.stop()
