"""Issue 31 items 10 and 11 (the rest): tracebacks become one clear answer, silent results speak.

Cases:
- a warehouse named `srv.duckdb` publishes its serving store (today the hard-coded
  `ATTACH ... AS srv` collides with the warehouse's own catalog name and nothing is published);
- a `role: lead` binding without `team` is refused at config load in one line (today: accepted,
  granting nothing);
- `serve --lake` answers `/api/v1/*` with a JSON 501 saying the API is not served in lake mode
  (today: the dashboard's HTML with 200);
- a report manifest entry without `path` is a problem line of `verify_folder`, not a KeyError;
- a Dash callback body nested 500,000 deep, or naming an output no callback has, is a 400
  (today: RecursionError / KeyError, HTTP 500).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuledger.core.config import load_settings
from gpuledger.core.errors import ConfigError
from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.reports.manifest import verify_folder
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.serving_store import serving_path
from tests.dashboards import conftest as _dash
from tests.dashboards.conftest import admin_headers, settings_with_roles

demo_source = _dash.demo_source  # the dashboards' demo warehouse fixture, shared


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _get(url: str, headers: dict[str, str]) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def test_warehouse_named_srv_publishes(demo_source: Path, tmp_path: Path) -> None:
    from gpuledger.dashboards import serving_results

    path = tmp_path / "srv.duckdb"
    shutil.copyfile(demo_source, path)
    with Warehouse.open(path, read_only=True) as wh:
        serving_results.refresh_serving(wh, settings_with_roles())
    store = serving_path(path)
    assert store.is_file() and store.stat().st_size > 0
    with Warehouse.open(store, read_only=True) as served, Warehouse.open(path, read_only=True) as wh:
        assert served.count("plans") == wh.count("plans")


def test_lead_without_team_refused(tmp_path: Path) -> None:
    config = tmp_path / "gpuledger.yaml"
    config.write_text("access:\n  roles:\n    - {subject: leo, role: lead}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    message = str(refused.value)
    assert "needs `team`" in message and "leo" in message and "\n" not in message


def test_manifest_entry_without_path(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("x\n")
    (tmp_path / "manifest.json").write_text(json.dumps({"files": [{"sha256": "0" * 64}, "junk"]}))
    problems = verify_folder(tmp_path)
    assert sum("has no `path`" in p for p in problems) == 2
    assert any("a.csv: not listed" in p for p in problems)


@pytest.fixture
def dashboard(demo_source: Path, tmp_path: Path) -> Iterator[RunningServer]:
    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    running = start_server(create_app(settings_with_roles(), path, background=False, cache_dir=tmp_path / "c"))
    yield running
    running.stop()


def _callback(output: str) -> dict[str, Any]:
    ident, prop = output.split(".")
    return {"output": output, "outputs": {"id": ident, "property": prop}, "inputs": [],
            "changedPropIds": [], "state": []}


def test_malformed_callbacks_are_400(dashboard: RunningServer) -> None:
    url = dashboard.url + "/_dash-update-component"
    deep = b"[" * 500_000 + b"]" * 500_000
    status, body = _post(url, deep, admin_headers())
    assert status == 400 and body.count("\n") == 1, (status, body[:300])
    status, body = _post(url, json.dumps(_callback("no-such-output.children")).encode(), admin_headers())
    assert status == 400 and body.count("\n") == 1, (status, body[:300])


def test_lake_mode_api_is_json_501(tmp_path: Path) -> None:
    from gpuledger.dashboards.lake_app import create_lake_app

    lake = tmp_path / "lake"
    lake.mkdir()
    running = start_server(create_lake_app(settings_with_roles(), str(lake)), "127.0.0.1", 0)
    try:
        for path in ("/api/v1/bill?period=2026-11", "/api/v1/", "/api/v1/idle"):
            status, kind, body = _get(running.url + path, admin_headers())
            assert status == 501 and kind.startswith("application/json"), (path, status, body[:200])
            assert "lake mode" in json.loads(body)["error"]
    finally:
        running.stop()
