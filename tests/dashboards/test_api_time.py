"""The API's time model and parameters (issue 32), on a real server over HTTP.

Cases:
- `/api/v1/bill?start=&end=` bills exactly that window: its fleet GPU-hours are the demo
  fleet's 32 cards x 6 hours (arithmetic here), and the document equals `gpuledger bill
  --start --end -o json` run as a subprocess on the same file;
- `window=7d` and `window=month-to-date` end at the start of the current hour and start 7 days
  before it / at the month's first instant (computed here from the clock, around the request);
- `period=last` is the month before the current one (the CLI's `last`);
- an unknown parameter is a 400 whose error names every accepted parameter; two time forms at
  once are a 400; `/recommendations` (stored per month) refuses `window=` with a 400 naming
  `period` as the one it accepts;
- `/api/v1/openapi.json` describes exactly the routes the server mounts under `/api/v1`, and
  each endpoint accepts every parameter it lists and refuses one it does not;
- unknown is never zero: on a serving store published without the month results,
  `/api/v1/recommendations` says `computed: false` with no saving figure and how to get one,
  to a lead too (the lead's total was 0.00: the scope rule summed their empty rows);
  with them, `computed: true` and its saving is the sum of every stored row's (the floor hides
  rows, never money).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.dashboards.app import RunningServer, create_app, start_server
from tests.dashboards.conftest import (
    LEAD_TEAM,
    PERIOD,
    admin_headers,
    lead_headers,
    settings_with_roles,
    store_results,
)
from tests.dashboards.test_api import get

GPUS = 32  # conftest.build_demo_warehouse's fleet
START, END = "2026-11-01T00:00:00Z", "2026-11-01T06:00:00Z"


def _serve(folder: Path, source: Path, *, results: bool) -> RunningServer:
    from gpuledger.dashboards.serving_results import publish_serving
    from gpuledger.warehouse import Warehouse

    path = folder / "warehouse.duckdb"
    shutil.copyfile(source, path)
    if results:
        store_results(path)
    else:  # the tables only: the month results are "not computed yet"
        with Warehouse.open(path, read_only=True) as wh:
            publish_serving(wh, settings_with_roles())
    app = create_app(settings_with_roles(), path, cache_dir=folder / "cache", background=False)
    return start_server(app, "127.0.0.1", 0)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[RunningServer]:
    running = _serve(tmp_path_factory.mktemp("api-time"), demo_source, results=True)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[RunningServer]:
    running = _serve(tmp_path_factory.mktemp("api-bare"), demo_source, results=False)
    yield running
    running.stop()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_start_end_bill_that_window(api: RunningServer, demo_source: Path, tmp_path: Path) -> None:
    status, doc = get(api, f"/api/v1/bill?start={START}&end={END}", admin_headers())
    assert status == 200, doc
    assert (_at(doc["start"]), _at(doc["end"])) == (_at(START), _at(END))
    assert doc["fleet_card_hours"] == pytest.approx(GPUS * 6.0)
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path.cwd()))}
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(demo_source), "bill", "--start", START,
         "--end", END, "-o", "json"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
        check=True)
    doc.pop("scope"), doc.pop("notes")
    assert doc == json.loads(done.stdout)


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


@pytest.mark.parametrize("window", ["7d", "month-to-date"])
def test_relative_windows_end_at_the_current_hour(api: RunningServer, window: str) -> None:
    before = _hour(datetime.now(UTC))
    status, doc = get(api, f"/api/v1/bill?window={window}", admin_headers())
    after = _hour(datetime.now(UTC))
    assert status == 200, doc
    end = _at(doc["end"])
    assert end in (before, after)
    want = end - timedelta(days=7) if window == "7d" else end.replace(day=1, hour=0)
    assert _at(doc["start"]) == want


def test_period_last_is_the_previous_month(api: RunningServer) -> None:
    today = datetime.now(UTC)
    previous = (today.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    status, doc = get(api, "/api/v1/bill?period=last", admin_headers())
    assert status == 200, doc
    assert doc["period"] == previous or _at(doc["start"]).strftime("%Y-%m") == previous


@pytest.mark.parametrize(("path", "accepted"), [
    ("/api/v1/bill?perod=2026-11", ["period", "start", "end", "window", "team", "by", "as_computed"]),
    ("/api/v1/idle?limit=5", ["period", "start", "end", "window", "team", "namespace", "by", "top"]),
    ("/api/v1/recommendations?kind=x", ["period", "team", "namespace", "all"]),
])
def test_unknown_parameters_name_the_accepted(api: RunningServer, path: str, accepted: list[str]) -> None:
    status, doc = get(api, path, admin_headers())
    assert status == 400, doc
    message = doc["error"]
    assert "\n" not in message and "unknown parameter" in message
    assert message.split("accepted: ", 1)[1].split(", ") == accepted


def test_time_forms_are_exclusive(api: RunningServer) -> None:
    status, doc = get(api, f"/api/v1/bill?period={PERIOD}&window=7d", admin_headers())
    assert status == 400 and "one of period" in doc["error"]
    status, doc = get(api, "/api/v1/recommendations?window=7d", admin_headers())
    assert status == 400 and "accepted: period" in doc["error"]  # stored per month: period only
    status, doc = get(api, f"/api/v1/bill?start={START}", admin_headers())
    assert status == 400 and "both start and end" in doc["error"]


def test_openapi_describes_the_mounted_routes(api: RunningServer) -> None:
    status, doc = get(api, "/api/v1/openapi.json", admin_headers())
    assert status == 200 and doc["openapi"].startswith("3.")
    mounted = {str(rule) for rule in api.app.server.url_map.iter_rules() if str(rule).startswith("/api/v1/")}
    assert set(doc["paths"]) == mounted
    for path, item in doc["paths"].items():
        if path.endswith("openapi.json"):
            continue
        status, answer = get(api, f"{path}?bogus=1", admin_headers())
        assert status == 400 and "bogus" in answer["error"], (path, answer)
        for param in item["get"]["parameters"]:  # listed: never refused as unknown
            status, answer = get(api, f"{path}?{param['name']}={param['example']}", admin_headers())
            assert "unknown parameter" not in str(answer), (path, param, answer)


def test_recommendations_not_computed_is_not_zero(bare: RunningServer, api: RunningServer) -> None:
    status, doc = get(bare, f"/api/v1/recommendations?period={PERIOD}", admin_headers())
    assert status == 200, doc
    assert doc["computed"] is False and doc["monthly_saving"] is None and doc["recommendations"] == []
    assert "refresh-serving" in doc["note"]
    status, doc = get(bare, f"/api/v1/recommendations?period={PERIOD}", lead_headers())
    assert status == 200 and doc["scope"] == [LEAD_TEAM], doc  # a lead is told "unknown", never 0
    assert doc["computed"] is False and doc["monthly_saving"] is None and "refresh-serving" in doc["note"]
    status, full = get(api, f"/api/v1/recommendations?period={PERIOD}&all=true", admin_headers())
    assert status == 200 and full["computed"] is True and full["below_floor"] == []
    rows = full["recommendations"]
    assert full["monthly_saving"] == pytest.approx(round(sum(r["monthly_saving"] for r in rows), 2), abs=0.011)
    status, floored = get(api, f"/api/v1/recommendations?period={PERIOD}", admin_headers())
    floor = floored["min_monthly_saving"]
    assert all(r["monthly_saving"] >= floor for r in floored["recommendations"])
    counted = sum(q["count"] for q in floored["below_floor"])
    assert len(floored["recommendations"]) + counted == len(rows)
    assert floored["monthly_saving"] == full["monthly_saving"]  # the floor hides rows, never money
