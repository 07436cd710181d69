"""The read-only JSON API under /api/v1 (on a real server, over HTTP) and the notebook facade.

Cases:
- `/api/v1/bill` as an admin is the document `gpuledger bill --format json` prints (the CLI run
  as a subprocess on the same file), key for key, `scope` aside;
- a lead gets only their team's lines and no fleet totals; `?team=<other>` is 403 for a lead,
  for bill, idle and recommendations alike; plans are 403 for a lead and listed for an admin;
- no user header → 401; a bad period → 400 with one line;
- `/api/v1/idle?team=X` holds only X's workloads, one row per workload;
- `/api/v1/recommendations` has no two rows for one workload and kind, and its per-team savings
  add up to its total;
- the recommendations document is built once per snapshot and cut per request: a lead's (and an
  admin's `?team=`) rows are the fleet document's rows of that team in the same order, with that
  team's saving as its total (rows under the advice floor included, as in the fleet's total); `?namespace=` holds that
  namespace's rows; a fleet reader asking twice gets the same bytes; a new snapshot's warm-up
  builds and serializes the default answer before it is served (the cache holds it already);
- `gpuledger.open(path).bill(...)` equals `compute_bill(...).lines`, `.to_pandas()` works,
  `idle(team=)` returns only that team, `plans()` lists the stored plans.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.dashboards.app import RunningServer, create_app, start_server
from tests.dashboards.conftest import (
    LEAD_TEAM,
    MIG_PLAN,
    OTHER_TEAM,
    PERIOD,
    admin_headers,
    lead_headers,
    settings_with_roles,
    store_results,
)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[RunningServer]:
    import shutil

    folder = tmp_path_factory.mktemp("api")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    running = start_server(create_app(settings_with_roles(), store_results(path), cache_dir=folder / "cache",
                                      background=False), "127.0.0.1", 0)
    yield running
    running.stop()


def get(server: RunningServer, path: str, headers: dict[str, str] | None) -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode()
        try:
            return exc.code, json.loads(body)
        except ValueError:
            return exc.code, body


def test_bill_equals_cli_json(api: RunningServer, demo_source: Path, tmp_path: Path) -> None:
    status, doc = get(api, f"/api/v1/bill?period={PERIOD}", admin_headers())
    assert status == 200 and doc["schema"] == "gpuledger.bill/v1" and doc.pop("scope") == "fleet"
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path.cwd()))}
    done = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(demo_source), "bill", "--period", PERIOD,
         "--format", "json"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600, check=True,
    )
    notes = doc.pop("notes")  # the API carries the bill's notes; the CLI prints them on stderr
    assert all(note in done.stderr for note in notes), (notes, done.stderr)
    assert doc == json.loads(done.stdout)


def test_lead_scope(api: RunningServer) -> None:
    status, doc = get(api, f"/api/v1/bill?period={PERIOD}", lead_headers())
    assert status == 200 and doc["scope"] == [LEAD_TEAM]
    assert {line["team"] for line in doc["lines"]} == {LEAD_TEAM}
    assert doc["fleet_cost"] is None and doc["unallocated"] == []
    for path in ("bill", "idle", "recommendations"):
        status, body = get(api, f"/api/v1/{path}?period={PERIOD}&team={OTHER_TEAM}", lead_headers())
        assert status == 403 and OTHER_TEAM in body["error"], path
    status, _ = get(api, "/api/v1/plans", lead_headers())
    assert status == 403
    status, plans = get(api, "/api/v1/plans", admin_headers())
    assert status == 200 and MIG_PLAN in [p["id"] for p in plans["plans"]]


def test_refusals(api: RunningServer) -> None:
    status, body = get(api, f"/api/v1/bill?period={PERIOD}", None)
    assert status == 401 and "401 Unauthorized" in body
    status, body = get(api, "/api/v1/bill?period=2026-13", admin_headers())
    assert status == 400 and "expected YYYY-MM" in body["error"]
    status, body = get(api, f"/api/v1/idle?period={PERIOD}&by=colour", admin_headers())
    assert status == 400 and "label:<key>" in body["error"]


def test_idle_and_recommendations_per_workload(api: RunningServer) -> None:
    status, doc = get(api, f"/api/v1/idle?period={PERIOD}&team={LEAD_TEAM}&top=5000", admin_headers())
    assert status == 200 and doc["workloads"]
    assert {w["team"] for w in doc["workloads"]} == {LEAD_TEAM}
    keys = [(w["namespace"], w["workload_kind"], w["workload"]) for w in doc["workloads"]]
    assert len(keys) == len(set(keys))
    status, recs = get(api, f"/api/v1/recommendations?period={PERIOD}", admin_headers())
    assert status == 200 and recs["recommendations"]
    keys = [(r["team"], r["namespace"], r["workload_kind"], r["workload"], r["kind"]) for r in recs["recommendations"]]
    assert len(keys) == len(set(keys))
    assert sum(recs["saving_by_team"].values()) == pytest.approx(recs["monthly_saving"], abs=0.05)


def _raw(server: RunningServer, path: str, headers: dict[str, str]) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(server.url + path, headers=headers), timeout=120) as answer:
        return bytes(answer.read())


@pytest.mark.parametrize("floor", ["", "&all=true"])
def test_recommendations_cut_per_request(api: RunningServer, floor: str) -> None:
    url = f"/api/v1/recommendations?period={PERIOD}{floor}"
    body = _raw(api, url, admin_headers())
    assert _raw(api, url, admin_headers()) == body
    fleet = json.loads(body)
    assert fleet["scope"] == "fleet" and fleet["computed"] is True
    mine = [r for r in fleet["recommendations"] if r["team"] == LEAD_TEAM]
    assert mine and len(mine) < len(fleet["recommendations"])
    for headers, ask in ((lead_headers(), ""), (admin_headers(), f"&team={LEAD_TEAM}")):
        status, doc = get(api, url + ask, headers)
        assert status == 200 and doc["scope"] == [LEAD_TEAM]
        assert doc["recommendations"] == mine
        assert doc["saving_by_team"] == {LEAD_TEAM: fleet["saving_by_team"][LEAD_TEAM]}
        assert doc["monthly_saving"] == fleet["saving_by_team"][LEAD_TEAM]  # rows under the floor too
        assert doc["computed"] is True and doc["min_monthly_saving"] == fleet["min_monthly_saving"]
    namespace = mine[0]["namespace"]
    status, doc = get(api, f"{url}&namespace={namespace}", admin_headers())
    assert status == 200
    assert doc["recommendations"] == [r for r in fleet["recommendations"] if r["namespace"] == namespace]


def test_recommendations_warmed_with_each_snapshot(demo_source: Path, tmp_path: Path) -> None:
    import shutil

    path = tmp_path / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    settings = settings_with_roles()
    app = create_app(settings, store_results(path), cache_dir=tmp_path / "cache", background=False)
    try:
        app.store.refresh()
        app.data.wait_warm()
        assert "api_recommendations" in app.data.warm_timings
        key = ("recommendations", app.data.default_period(), settings.advice.min_monthly_saving)

        def not_warmed() -> str:
            raise AssertionError("the answer was not built by the warm-up")

        body = app.data.memo(("api_body", "/recommendations", key), not_warmed)
        answer = app.server.test_client().get(f"/api/v1/recommendations?period={PERIOD}", headers=admin_headers(),
                                              environ_base={"REMOTE_ADDR": "127.0.0.1"})
        assert answer.status_code == 200 and answer.get_data(as_text=True) == body
        assert json.loads(body)["recommendations"]
    finally:
        app.close()


def test_notebook_facade(demo_source: Path) -> None:
    import gpuledger
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.core.config import Settings
    from gpuledger.core.period import Period
    from gpuledger.warehouse import Warehouse

    gl = gpuledger.open(demo_source)
    lines = gl.bill(PERIOD, by=["team"])
    with Warehouse.open(demo_source, read_only=True) as wh:
        reference = compute_bill(wh, Period.exact(PERIOD).window, Settings(), ("team",)).lines
    from polars.testing import assert_frame_equal

    # money to the cent exactly; card-hours up to float summation order
    assert_frame_equal(lines.sort("team"), reference.sort("team"), rel_tol=1e-9)
    assert lines.sort("team")["cost"].to_list() == reference.sort("team")["cost"].to_list()
    assert lines.to_pandas()["cost"].sum() == pytest.approx(float(reference["cost"].sum()))
    idle = gl.idle(PERIOD, team=LEAD_TEAM)
    assert idle.height and set(idle["team"].to_list()) == {LEAD_TEAM}
    recs = gl.recommendations(PERIOD)
    assert recs.group_by("team", "namespace", "workload_kind", "workload", "kind").len()["len"].max() == 1
    assert set(gl.plans()["id"].to_list()) >= {MIG_PLAN}
    assert isinstance(gl.budgets(PERIOD), pl.DataFrame)
