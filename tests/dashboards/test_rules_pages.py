"""The dashboard says what the bill says about its rules (issue 28, docs/decisions/0158).

Served on the hand-built fleet of `tests.analytics.rules_fleet` (rolled up under the default
rules) under another MIG share basis (`memory`), from a copy of the warehouse (a collector holds
it and no serving store is published yet, so the raw samples are there), with expectations
worked out there:

- raw samples still there: the bill is computed from them under the server's rules; the My
  team, Teams and Fleet pages show its note (naming both rule sets) in a banner above the
  numbers, the Fleet page says the same of its heatmap's hours, and `/api/v1/bill` carries it
  in `notes`; `?as_computed=true` bills the roll-up under its stored rules (basis `compute`);
- after compaction: the pages show the refusal as a page of its own (not "Cannot show this
  page"), the API answers 400 naming `--as-computed`, and `?as_computed=true` still bills.

On the serving store (the demo warehouse rolled up under config A, the store published, served
under config B: idle < 15 %), the store keeps no raw samples of rolled-up hours:
- every page of billed hours (My team, Teams, Fleet) shows the refusal naming `gpuledger rollup`
  (the month's) and `--as-computed`; Queues and Plans (no billed hours) show as ever;
  `/metrics` answers 200 without the refused months' bill series;
- `gpuledger rollup` on the warehouse under B (what the page says) publishes the store again
  and the page shows the month;
- in Chromium, the Fleet page shows the refusal in the page.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.cli import main
from gpuledger.core.access import resolve_roles
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.dashboards.app import create_app
from gpuledger.dashboards.callbacks import render_page
from gpuledger.warehouse import Warehouse
from tests.analytics.rules_fleet import DAYS, SHARE, WHOLE, fleet, rolled_fleet, settings
from tests.dashboards.conftest import ADMIN, PERIOD, admin_headers, settings_with_roles
from tests.dashboards.test_serving_rules import _find, _text
from tests.dashboards.test_store import collector

__all__ = ["fleet", "rolled_fleet"]  # fixtures

ROLES = settings_with_roles()
ENV = {"REMOTE_ADDR": "127.0.0.1"}
OLD_FP = Rules.of(settings()).rollup_fingerprint


def _served(**changes: Any) -> Settings:
    return settings(access=ROLES.access, **changes)


def _admin(settings_: Settings) -> Any:
    return resolve_roles(ADMIN, ("platform-admins",), settings_.access)


def _page(app: Any, name: str) -> Any:
    return render_page(app, _admin(app.settings), {"page": f"/{name}", "period": PERIOD})


def _get(app: Any, url: str) -> Any:
    return app.server.test_client().get(url, headers=admin_headers(), environ_base=ENV)


def _copy_app(path: Path, served: Settings, cache: Path) -> Any:
    """The app reading a copy of `path` (what it serves while a collector holds the warehouse
    before any serving store exists): the raw samples of rolled-up hours are in it."""
    app = create_app(served, path, background=False, cache_dir=cache)
    with collector(path, "commit-and-hold"):
        assert app.store.refresh() and app.store.current().owned
    return app


def test_the_pages_and_the_api_carry_the_bills_notes(fleet: Path, tmp_path: Path) -> None:
    served = _served(sharing={"mig_share_basis": "memory"})
    new_fp = Rules.of(served).rollup_fingerprint
    app = _copy_app(fleet, served, tmp_path / "cache")
    try:
        (note,) = app.data.bill_notes(PERIOD)
        assert "billed from raw samples" in note and OLD_FP in note and new_fp in note
        for page, id in (("team", "team-bill-notes"), ("teams", "teams-bill-notes"), ("fleet", "fleet-bill-notes")):
            (banner,) = _find(_page(app, page), id)
            assert _text(banner).strip() == note, page
        (heat,) = _find(_page(app, "fleet"), "fleet-heat-rules")
        assert _text(heat).startswith(f"heatmap {PERIOD}: ") and OLD_FP in _text(heat)
        answer = _get(app, f"/api/v1/bill?period={PERIOD}")
        doc = answer.get_json()
        assert answer.status_code == 200 and doc["notes"] == [note] and doc["mig_share_basis"] == "memory"
        beta = next(line for line in doc["lines"] if line["team"] == "beta")
        assert beta["card_hours"] == pytest.approx(DAYS * 24 * SHARE["memory"], abs=1e-6)
        stored = _get(app, f"/api/v1/bill?period={PERIOD}&as_computed=true").get_json()
        assert stored["rules"]["as_computed"] is True and stored["mig_share_basis"] == "compute"
        assert stored["notes"] == []
        beta = next(line for line in stored["lines"] if line["team"] == "beta")
        assert beta["card_hours"] == pytest.approx(DAYS * 24 * SHARE["compute"], abs=1e-6)
        bad = _get(app, f"/api/v1/bill?period={PERIOD}&as_computed=maybe")
        assert bad.status_code == 400 and "as_computed" in bad.get_json()["error"]
    finally:
        app.close()


def test_after_compaction_the_pages_refuse_in_words(fleet: Path, tmp_path: Path) -> None:
    from gpuledger.analytics.usage.rollup import compact_raw_samples

    with Warehouse.open(fleet) as wh:
        compact_raw_samples(wh, settings(retention={"raw_days": 1}), WHOLE.end + timedelta(hours=20))
    app = _copy_app(fleet, _served(sharing={"mig_share_basis": "memory"}), tmp_path / "cache")
    try:
        for page in ("team", "teams", "fleet"):
            rendered = _page(app, page)
            assert not _find(rendered, "error"), page
            (refusal,) = _find(rendered, "rules-refusal")
            text = _text(refusal)
            assert OLD_FP in text and "--as-computed" in text and "compacted" in text, page
        answer = _get(app, f"/api/v1/bill?period={PERIOD}")
        assert answer.status_code == 400 and "--as-computed" in answer.get_json()["error"]
        stored = _get(app, f"/api/v1/bill?period={PERIOD}&as_computed=1")
        assert stored.status_code == 200 and stored.get_json()["mig_share_basis"] == "compute"
    finally:
        app.close()


# The serving store ---------------------------------------------------------------------------
A = settings_with_roles()
B = A.model_copy(update={"idle": A.idle.model_copy(update={"threshold": 0.15})})
ROLLED = Window(datetime(2026, 10, 31, 18, tzinfo=UTC), datetime(2026, 11, 1, 10, tzinfo=UTC))


@pytest.fixture(scope="module")
def served_a(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Path:
    """The demo warehouse rolled up under A over `ROLLED`, its serving store published under A."""
    from gpuledger.analytics.usage.rollup import rollup_batch
    from gpuledger.dashboards.serving_results import refresh_serving

    path = tmp_path_factory.mktemp("rules-serving") / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    with Warehouse.open(path) as wh:
        wh.load(rollup_batch(wh, ROLLED, A))
    with Warehouse.open(path, read_only=True) as wh:
        refresh_serving(wh, A)
    return path


def _copy(served: Path, tmp_path: Path) -> Path:
    from gpuledger.warehouse.serving_store import serving_path

    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(served, path)
    shutil.copyfile(serving_path(served), serving_path(path))
    return path


def test_the_serving_store_refusal_is_a_page_and_rollup_ends_it(served_a: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _copy(served_a, tmp_path)
    app = create_app(B, path, background=False, cache_dir=tmp_path / "b")
    try:
        snap = app.data.serving()
        assert not snap.owned  # the serving store, not a copy of the warehouse
        for page in ("team", "teams", "fleet"):
            rendered = _page(app, page)
            assert not _find(rendered, "error"), page
            (refusal,) = _find(rendered, "rules-refusal")
            text = _text(refusal)
            assert Rules.of(A).rollup_fingerprint in text and Rules.of(B).rollup_fingerprint in text, page
            assert "gpuledger rollup --period" in text and "--as-computed" in text and "serving store" in text
        for page in ("queues", "plans"):  # no billed hours on them: they show as ever
            rendered = _page(app, page)
            assert not _find(rendered, "rules-refusal") and _find(rendered, f"{page}-page"), page
        metrics = _get(app, "/metrics")
        assert metrics.status_code == 200 and b"gpuledger_cost{" not in metrics.data
        assert b"gpuledger_snapshot_age_seconds" in metrics.data
    finally:
        app.close()
    # what the page says: store the server's rules over those hours on the warehouse
    config = tmp_path / "b.yaml"
    config.write_text("idle:\n  threshold: 0.15\n")
    code = main(["--warehouse", str(path), "--config", str(config), "rollup",
                 "--start", "2026-10-31T00:00:00Z", "--end", "2026-11-02T00:00:00Z"])
    assert code == 0, capsys.readouterr().err
    with Warehouse.open(path, read_only=True) as wh:  # publish the store again (a served writer does)
        from gpuledger.dashboards.serving_results import refresh_serving

        refresh_serving(wh, B)
    app = create_app(B, path, background=False, cache_dir=tmp_path / "b2")
    try:
        rendered = _page(app, "fleet")
        assert not _find(rendered, "rules-refusal") and _find(rendered, "fleet-page")
        assert app.data.bill_notes(PERIOD) == []
    finally:
        app.close()


@pytest.mark.browser
def test_the_refusal_in_a_browser(served_a: Path, tmp_path: Path, open_page: Any) -> None:
    """The Fleet page served under B from the serving store, in Chromium: the refusal is the page."""
    from gpuledger.dashboards.app import start_server

    path = _copy(served_a, tmp_path)
    running = start_server(create_app(B, path, background=False, cache_dir=tmp_path / "browser"), "127.0.0.1", 0)
    try:
        page = open_page(admin_headers())
        page.goto(f"{running.url}/fleet?period={PERIOD}")
        refusal = page.wait_for_selector("#rules-refusal")
        assert refusal is not None
        text = refusal.inner_text()
        assert "This month was computed under other rules" in text
        assert "gpuledger rollup --period" in text and "--as-computed" in text
        assert page.query_selector("#error") is None
    finally:
        running.stop()
