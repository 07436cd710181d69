"""The dashboard shows the Volcano pool and the preemption line (the demo's warehouse: the
simulator's default fleet, whose H100 training pool Volcano queues).

- the Queues page lists the Volcano Queues with their deserved / capability GPUs, as stored;
  a lead sees only the Volcano Queues their team's PodGroups submit to;
- the team page's priority table equals the bill by (team, priority_class), and its
  "GPU-hours lost to preemption" line equals the team's preemption losses, recomputed here
  from the stored rows (GPUs x hours since the later of start and checkpoint);
- both render to HTML without error.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.core.access import resolve_roles
from gpuledger.core.period import Period
from gpuledger.dashboards.pages import queues, team
from gpuledger.dashboards.pages.common import PageContext
from gpuledger.dashboards.state import ViewState
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import ADMIN, LEAD, LEAD_TEAM, PERIOD, demo_source, settings_with_roles

__all__ = ["demo_source"]  # the session fixture, shared with the dashboard tests
SETTINGS = settings_with_roles()
ADMIN_P = resolve_roles(ADMIN, ("platform-admins",), SETTINGS.access)
LEAD_P = resolve_roles(LEAD, (), SETTINGS.access)


@pytest.fixture(scope="module")
def app(tmp_path_factory, demo_source):
    from gpuledger.dashboards.app import create_app

    folder = tmp_path_factory.mktemp("volcano-dash")
    path = folder / "warehouse.duckdb"
    shutil.copyfile(demo_source, path)
    app = create_app(SETTINGS, path, background=False, cache_dir=folder / "cache")
    yield app, path
    app.close()


def _ctx(app: Any, principal: Any, **state: Any) -> PageContext:
    return PageContext(principal, ViewState(period=PERIOD, **state), app.data, app.settings)


def test_queues_page_lists_volcano_queues(app):
    dash_app, path = app
    with Warehouse.open(path, read_only=True) as wh:
        stored = {r["name"]: json.loads(r["spec"]) for r in wh.query(
            "SELECT name, CAST(spec AS VARCHAR) AS spec FROM queues WHERE kind = 'Queue'").iter_rows(named=True)}
        groups = wh.query("SELECT q.namespace, json_extract_string(q.spec, '$.queue') AS queue, n.team "
                          "FROM queues q JOIN namespaces n USING (namespace) WHERE q.kind = 'PodGroup'")
    assert stored
    admin = queues.view(_ctx(dash_app, ADMIN_P))
    rows = {r["queue"]: r for r in admin.volcano.iter_rows(named=True)}
    assert set(rows) == set(stored)
    for name, spec in stored.items():
        assert rows[name]["deserved_gpus"] == spec["deserved"]["nvidia.com/gpu"]
        assert rows[name]["capability_gpus"] == spec["capability"]["nvidia.com/gpu"]
    mine = set(groups.filter(pl.col("team") == LEAD_TEAM)["queue"].to_list())
    assert mine
    lead = queues.view(_ctx(dash_app, LEAD_P))
    assert set(lead.volcano["queue"].to_list()) == mine
    assert "volcano-queue-table" in str(queues.render(admin))


def test_team_page_priority_and_preemption_line(app):
    dash_app, path = app
    view = team.view(_ctx(dash_app, ADMIN_P, team=LEAD_TEAM))
    window = Period.exact(PERIOD).window
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, window, SETTINGS, ("team", "priority_class"))
        rows = wh.query("SELECT p.namespace, p.gpus, p.run_start, p.checkpoint_at, p.preempted_at, n.team "
                        "FROM preemptions p JOIN namespaces n USING (namespace) "
                        "WHERE p.preempted_at >= ? AND p.preempted_at < ?", [window.start, window.end])
    want = bill.lines.filter(pl.col("team") == LEAD_TEAM).select("priority_class", "cost")
    got = view.by_priority_class.select("priority_class", "cost")
    assert dict(got.iter_rows()) == pytest.approx(dict(want.iter_rows()))
    hours = sum(r["gpus"] * (r["preempted_at"] - max(r["run_start"], r["checkpoint_at"] or r["run_start"]))
                .total_seconds() / 3600 for r in rows.iter_rows(named=True) if r["team"] == LEAD_TEAM)
    assert hours > 0
    shown = float(view.preemption["lost_gpu_hours"].sum()) if not view.preemption.is_empty() else 0.0
    assert shown == pytest.approx(hours, abs=1e-9)
    html = str(team.render(view))
    assert "preemption-line" in html and "team-priority-table" in html
