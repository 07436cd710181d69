"""The Capacity now page (issue 35): what is free in each shape, and each queue's headroom.

Cases, on a copy of the demo warehouse with one running pod of an exclusive H100 node ended
before the inventory (so some whole GPUs are free):
- the KPIs are figures worked out here with SQL and arithmetic, not through `analytics.capacity`:
  whole GPUs, MIG instances and time-slice replicas ready = each node's allocatable minus the
  running pods' requests, summed; HAMi memory = the best card's (its memory minus the
  allocations alive on it); the whole GPUs freed are the ended pod's request;
- the shape grid holds the rows `/api/v1/capacity` serves (same shapes, ready and placeable,
  per cluster, pool and model) and the headroom grid its queue rows;
- roles as the API: a lead and a viewer see what the API gives them (all of it: capacity is no
  team's cost); a lead naming another team is refused, as the API answers 403; a user without a
  role is refused, as the API answers 403; the link is in the navigation for every role;
- the inventory line: the time, and the banner's "Stale" wording past two collection intervals.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.core.errors import AccessDeniedError
from gpuledger.dashboards.app import create_app
from gpuledger.dashboards.callbacks import render_page
from gpuledger.dashboards.pages import capacity
from gpuledger.dashboards.registry import PAGES
from gpuledger.warehouse import Warehouse
from tests.capacity.free_now import hami_left, whole_gpus_free
from tests.dashboards.conftest import (
    OTHER_TEAM,
    PERIOD,
    STRANGER,
    admin_headers,
    lead_headers,
    settings_with_roles,
    store_results,
)
from tests.dashboards.test_pages import ADMIN_P, LEAD_P, VIEWER_P, ctx, who


def free_per_family(wh: Warehouse) -> dict[str, float]:
    """Allocatable minus the running pods' requests per node and resource (never below 0),
    summed per family: exclusive nodes' whole GPUs, MIG instances, time-slice replicas."""
    at = wh.scalar("SELECT max(observed_at) FROM nodes")
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for node, text in wh.query("SELECT node, CAST(gpu_requests AS VARCHAR) FROM pods "
                               "WHERE node IS NOT NULL AND end_ts >= ?", [at]).rows():
        for resource, amount in json.loads(text or "{}").items():
            used[node][resource] += float(amount)
    out = {"whole GPU": 0.0, "MIG": 0.0, "time-slice": 0.0}
    for node, mode, text in wh.query("SELECT node, sharing_mode, CAST(allocatable AS VARCHAR) FROM nodes").rows():
        for resource, amount in json.loads(text).items():
            family = ("MIG" if resource.startswith("nvidia.com/mig-") else
                      {"exclusive": "whole GPU", "timeslice": "time-slice"}.get(mode)
                      if resource == "nvidia.com/gpu" else None)
            if family:
                out[family] += max(0.0, float(amount) - used[node][resource])
    return out


def _end_one_pod(path: Path) -> float:
    """End, an hour before the inventory, one running pod holding whole GPUs on an exclusive
    node; returns its request."""
    with Warehouse.open(path) as wh:
        at = wh.scalar("SELECT max(observed_at) FROM nodes")
        pod, ns, text = wh.query(
            "SELECT pod, namespace, CAST(gpu_requests AS VARCHAR) FROM pods JOIN nodes USING (node) "
            "WHERE sharing_mode = 'exclusive' AND end_ts >= ? ORDER BY pod LIMIT 1", [at]).row(0)
        wh.execute("UPDATE pods SET end_ts = ? WHERE pod = ? AND namespace = ?", [at - timedelta(hours=1), pod, ns])
    return float(json.loads(text)["nvidia.com/gpu"])


@pytest.fixture(scope="module")
def freed(tmp_path_factory: pytest.TempPathFactory, demo_source: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("capacity-page")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    with Warehouse.open(path, read_only=True) as wh:
        before = whole_gpus_free(wh)
    ended = _end_one_pod(path)
    with Warehouse.open(path, read_only=True) as wh:
        figures = {**free_per_family(wh), "hami": max(hami_left(wh)[0].values()),
                   "whole_before": before, "ended": ended, "whole_check": whole_gpus_free(wh)}
    app = create_app(settings_with_roles(), store_results(path), background=False, cache_dir=folder / "cache")
    yield app, figures
    app.close()


def _ids(node: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            stack.extend(item)
            continue
        if getattr(item, "id", None) is not None and isinstance(item.id, str):
            found[item.id] = item
        if getattr(item, "children", None) is not None:
            stack.append(item.children)
    return found


def _value(component: Any) -> float:
    """A KPI's unrounded number (`data-value`)."""
    return float(component.to_plotly_json()["props"]["data-value"])


def _api(app: Any, headers: dict[str, str], query: str = "") -> tuple[int, Any]:
    answer = app.server.test_client().get(f"/api/v1/capacity{query}", headers=headers)
    return answer.status_code, answer.get_json()


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["cluster"], r["pool"], r["model"], r["shape"], float(r["ready"]), int(r["placeable"]))


def test_page_figures_are_the_warehouse_arithmetic(freed: tuple[Any, dict[str, Any]]) -> None:
    app, figures = freed
    assert figures["ended"] > 0 and figures["whole GPU"] == figures["whole_before"] + figures["ended"]
    assert figures["whole GPU"] == figures["whole_check"]
    ids = _ids(capacity.show(ctx(app, ADMIN_P)))
    for kind, _, id_ in capacity.KPIS[:3]:
        assert _value(ids[id_]) == figures[kind], kind
    assert figures["MIG"] > 0 and figures["time-slice"] > 0  # the demo shares cards both ways
    assert _value(ids["kpi-capacity-hami"]) == figures["hami"] > 0
    status, doc = _api(app, admin_headers())
    assert status == 200
    rows = ids["capacity-table-grid"].rowData
    assert sorted(_key(r) for r in rows) == sorted(_key(r) for r in doc["capacity"])
    assert {r["kind"] for r in rows} >= {"whole GPU", "MIG", "time-slice", "HAMi"}
    queues = ids["capacity-queues-grid"].rowData
    assert len(queues) == len(doc["queues"]) > 0
    by_key = {(q["cluster_queue"], q["flavor"], q["resource"]): q for q in doc["queues"]}
    for q in queues:
        api = by_key[(q["cluster_queue"], q["flavor"], q["resource"])]
        assert (q["nominal"], q["used"], q["free"], q["borrowable"]) == (
            api["nominal"], api["used"], api["free"], api["borrowable"])
        assert q["free"] == max(0.0, q["nominal"] - q["used"])  # Kueue's own arithmetic
    assert "Inventory as of" in str(ids["capacity-at"].children)


def test_roles_are_the_apis(freed: tuple[Any, dict[str, Any]]) -> None:
    app, _ = freed
    admin = {_key(r) for r in _ids(capacity.show(ctx(app, ADMIN_P)))["capacity-table-grid"].rowData}
    status, doc = _api(app, lead_headers())
    assert status == 200 and doc["scope"] == ["nlp"]
    for principal in (LEAD_P, VIEWER_P):
        shown = {_key(r) for r in _ids(capacity.show(ctx(app, principal)))["capacity-table-grid"].rowData}
        assert shown == admin == {_key(r) for r in doc["capacity"]}
    status, _ = _api(app, lead_headers(), f"?team={OTHER_TEAM}")
    assert status == 403
    with pytest.raises(AccessDeniedError):
        capacity.view(ctx(app, LEAD_P, team=OTHER_TEAM))
    page = _ids(render_page(app, LEAD_P, {"page": "/capacity", "period": PERIOD, "team": OTHER_TEAM}))
    assert "refusal" in page and "capacity-table" not in page
    stranger = who(STRANGER)
    assert _api(app, {"X-Forwarded-User": STRANGER})[0] == 403
    page = _ids(render_page(app, stranger, {"page": "/capacity", "period": PERIOD}))
    assert "refusal" in page and "capacity-table" not in page
    assert all(PAGES.get("/capacity").allows(p) for p in (ADMIN_P, LEAD_P, VIEWER_P))


def test_inventory_line_says_when_and_stale() -> None:
    at = datetime(2026, 11, 1, 11, 59, tzinfo=UTC)
    fresh = str(capacity.inventory_line(at, at + timedelta(minutes=20)).children)
    assert "Inventory as of 2026-11-01 11:59:00 UTC" in fresh and "Stale" not in fresh
    stale = _ids(capacity.inventory_line(at, at + timedelta(hours=2, minutes=5)))
    assert stale["capacity-stale"].children == (" Stale: no new inventory for 2 h 5 min (more than 30 min, "
                                                "two collection intervals); is collection running?")
    assert "capacity-stale" in _ids(capacity.inventory_line(None, at))
    assert "Simulated" in str(capacity.inventory_line(at, at + timedelta(days=3), simulated=True).children)


def test_where_groups_cards_by_node_by_their_short_uuid() -> None:
    """HAMi's per-card rows once filled a row 40 lines tall with whole UUIDs: each node once, each
    card by the UUID's first block, its amount beside it, most left first as the document has them."""
    from gpuledger.dashboards.pages.capacity import _where

    row = {"nodes": ["n1", "n2"], "per_card": [
        {"card": "n1/GPU-cae1207c-d9a1-1896-40d8-8661a0e5de07", "free": 100},
        {"card": "n2/GPU-6025d051-8396-4363-daa2-ffb8038791e4", "free": 75},
        {"card": "n1/GPU-b6035e90-d87b-fd2c-783b-8424ee808a6d", "free": 70}]}
    assert _where(row) == "n1: GPU-cae1207c (100), GPU-b6035e90 (70); n2: GPU-6025d051 (75)"
    assert _where({"nodes": ["n1", "n2"], "per_card": []}) == "n1, n2"
