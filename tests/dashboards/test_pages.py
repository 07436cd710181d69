"""Page logic as plain functions, on the demo warehouse, against the bill computed apart.

Cases:
- My team (lead of nlp): cost, card-hours, idle cost and last month's cost are the team's lines
  of `compute_bill` (what `gpuledger bill` prints) to the cent; with a model picked they are the
  (team, model) line; the daily chart and the model/mode split add up to the team's detail;
  budget share from config; the queue table holds only the team's ClusterQueue;
- the same lead asking for another team (URL or default) is refused server-side: `view`
  raises, `render_page` shows a refusal that contains none of that team's numbers;
- a lead is refused the Fleet and Plans pages; a viewer sees them;
- Fleet: allocated + unallocated card-hours equal the fleet's card-hours; the unattributed
  table lists exactly the bill's unattributed namespaces; unlabeled namespaces are listed;
- MIG map cells (hand-made instances): each GPU's cells tile 8 memory slices without overlap;
  a 3g + 1g card leaves 3 slices stranded; owners come from the holder's team;
- Queues: a lead sees only the ClusterQueues their namespaces submit to; an admin sees all; the
  mean use matches an independent query on the raw samples;
- URL/filter sync: a lead is offered only their team; changing a control writes the URL;
- CSV download: a lead gets their own team's rows (costs add up to the bill line) and a
  PermissionError for another team; a bad period is an InputError;
- token cost per team and model service: summed over teams it equals `analytics.workloads.tokens`'
  fleet figures (tokens, GPU cost, cost per million prompt tokens); the team page lists the
  team's model services;
- the default period comes from the data's last instant: an allocation ending exactly at
  midnight of the next month (end exclusive) does not make that empty month the default.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.core.access import Principal, resolve_roles
from gpuledger.core.errors import AccessDeniedError, InputError
from gpuledger.core.period import Period
from gpuledger.dashboards.app import bill_csv
from gpuledger.dashboards.callbacks import render_page
from gpuledger.dashboards.pages import fleet, plans, queues, team
from gpuledger.dashboards.pages.common import PageContext
from gpuledger.dashboards.registry import PAGES
from gpuledger.dashboards.shell import sync
from gpuledger.dashboards.state import ViewState
from tests.dashboards.conftest import (
    ADMIN,
    LEAD,
    LEAD_TEAM,
    OTHER_TEAM,
    PERIOD,
    PREVIOUS,
    VIEWER,
    lead_team_queues,
    settings_with_roles,
)

SETTINGS = settings_with_roles()


def who(user: str, groups: tuple[str, ...] = ()) -> Principal:
    return resolve_roles(user, groups, SETTINGS.access)


ADMIN_P = who(ADMIN, ("platform-admins",))
LEAD_P = who(LEAD)
VIEWER_P = who(VIEWER)


def ctx(app: Any, principal: Principal, **state: Any) -> PageContext:
    return PageContext(principal, ViewState(period=PERIOD, **state), app.data, app.settings)


def line(bill: Any, **keys: str) -> dict[str, float]:
    rows = bill.lines
    for k, v in keys.items():
        rows = rows.filter(pl.col(k) == v)
    assert rows.height == 1
    return rows.row(0, named=True)


def test_team_numbers_equal_the_bill(shared_app: Any, reference_bills: dict, demo_source: Path) -> None:
    v = team.view(ctx(shared_app, LEAD_P))
    assert v.team == LEAD_TEAM  # a lead's default team
    ref = line(reference_bills[(PERIOD, ("team",))], team=LEAD_TEAM)
    for key in ("cost", "card_hours", "idle_cost", "idle_card_hours"):
        assert v.line[key] == pytest.approx(ref[key], abs=0.005), key
    prev = line(reference_bills[(PREVIOUS, ("team",))], team=LEAD_TEAM)
    assert v.previous is not None and v.previous["cost"] == pytest.approx(prev["cost"], abs=0.005)
    assert v.budget == 400.0
    # the charts add up to the team's (unrounded) detail, within a cent of the rounded line
    assert float(v.daily["cost"].sum()) == pytest.approx(ref["cost"], abs=0.01)
    assert float(v.by_model_mode["card_hours"].sum()) == pytest.approx(ref["card_hours"], rel=1e-9)
    assert set(v.daily["day"].to_list()) == {date(2026, 11, 1)}
    assert v.queue_summary["cluster_queue"].to_list() == lead_team_queues(demo_source, LEAD_TEAM)
    assert v.download_href == f"/download/bill.csv?period={PERIOD}&team={LEAD_TEAM}"


def test_team_model_filter(shared_app: Any, reference_bills: dict) -> None:
    bill = reference_bills[(PERIOD, ("team", "model"))]
    model = bill.lines.filter(pl.col("team") == LEAD_TEAM)["model"][0]
    v = team.view(ctx(shared_app, LEAD_P, model=model))
    ref = line(bill, team=LEAD_TEAM, model=model)
    assert v.line["cost"] == pytest.approx(ref["cost"], abs=0.005)
    assert v.line["card_hours"] == pytest.approx(ref["card_hours"], rel=1e-9)
    assert set(v.by_model_mode["model"].to_list()) == {model}


def test_lead_refused_other_team(shared_app: Any, reference_bills: dict) -> None:
    with pytest.raises(AccessDeniedError, match=f"'{LEAD}'.*'{OTHER_TEAM}'"):
        team.view(ctx(shared_app, LEAD_P, team=OTHER_TEAM))
    page = render_page(shared_app, LEAD_P, {"page": "/team", "period": PERIOD, "team": OTHER_TEAM})
    text = str(page.to_plotly_json())
    assert "refusal" in text
    other_cost = line(reference_bills[(PERIOD, ("team",))], team=OTHER_TEAM)["cost"]
    assert f"{other_cost:,.2f}" not in text


@pytest.mark.parametrize("page", ["/fleet", "/plans"])
def test_lead_refused_fleet_pages(shared_app: Any, page: str) -> None:
    out = render_page(shared_app, LEAD_P, {"page": page, "period": PERIOD})
    assert getattr(out, "id", None) == "refusal"
    assert getattr(render_page(shared_app, VIEWER_P, {"page": page, "period": PERIOD}), "id", None) != "refusal"


def test_fleet_totals(shared_app: Any, reference_bills: dict) -> None:
    bill = reference_bills[(PERIOD, ("team",))]
    v = fleet.view(ctx(shared_app, ADMIN_P))
    assert v.totals["fleet_cost"] == pytest.approx(bill.fleet_cost, abs=0.005)
    assert v.totals["allocated"] + v.totals["unallocated"] == pytest.approx(bill.fleet_card_hours, rel=1e-9)
    assert sorted(v.unattributed["namespace"].to_list()) == sorted(bill.unattributed_namespaces)
    assert {"sandbox", "hackathon"} <= set(v.unlabeled["namespace"].to_list())
    assert v.mig_nodes == ["a100-mig-000"]
    per_gpu = v.mig_cells.group_by("gpu").agg(pl.col("size").sum())
    assert per_gpu["size"].to_list() == [8] * per_gpu.height and per_gpu.height == 8


def test_mig_cells_hand_made() -> None:
    instances = pl.DataFrame({
        "node": ["n1", "n1", "n1"], "gpu_index": [0, 0, 1], "model": ["A100-80GB"] * 3,
        "uuid": ["GPU-a", "GPU-a", "GPU-b"], "gpu_i_id": [1, 9, 0], "profile": ["3g.40gb", "1g.10gb", "7g.80gb"],
        "namespace": ["nlp", None, "cv"], "pod": ["p1", None, "p2"], "team": ["nlp", None, None],
    })
    cells = fleet.mig_cells(instances)
    gpu0 = cells.filter(pl.col("gpu") == "n1 / GPU 0")
    assert sorted(gpu0["owner"].to_list()) == ["free", "nlp", "stranded"]
    assert int(gpu0.filter(pl.col("owner") == "stranded")["size"].sum()) == 3
    covered = sorted(s for r in gpu0.iter_rows(named=True) for s in range(r["start"], r["start"] + r["size"]))
    assert covered == list(range(8))
    gpu1 = cells.filter(pl.col("gpu") == "n1 / GPU 1")
    assert gpu1.rows() == [("n1 / GPU 1", 0, 8, "unattributed", "7g.80gb",
                            "7g.80gb (GPU_I_ID 0) held by cv/p2")]


def test_queues_scoped_to_lead(shared_app: Any, demo_source: Path) -> None:
    lead_view = queues.view(ctx(shared_app, LEAD_P))
    assert lead_view.queues == lead_team_queues(demo_source, LEAD_TEAM)
    admin_view = queues.view(ctx(shared_app, ADMIN_P))
    assert len(admin_view.queues) > 5 and LEAD_TEAM in admin_view.queues
    with pytest.raises(AccessDeniedError):
        queues.view(ctx(shared_app, LEAD_P, team=OTHER_TEAM))
    # mean GPU-equivalents in use, recomputed from the raw samples
    with shared_app.store.reader() as wh:
        raw = wh.query(
            "SELECT ts, sum(usage * CASE WHEN resource = 'nvidia.com/gpu' THEN 1.0"
            " ELSE CAST(regexp_extract(resource, 'mig-(\\d+)g', 1) AS DOUBLE) / 7 END) AS u"
            " FROM queue_samples WHERE cluster_queue = ? AND ts >= ? GROUP BY ts",
            [LEAD_TEAM, "2026-11-01T00:00:00Z"],
        )
    hourly = lead_view.series.filter(pl.col("cluster_queue") == LEAD_TEAM)
    assert hourly.select(pl.col("usage").mean()).item() == pytest.approx(raw.select(pl.col("u").mean()).item(),
                                                                         rel=1e-9)


def test_plans_view(shared_app: Any) -> None:
    v = plans.view(ctx(shared_app, VIEWER_P), shared_app.actions)
    assert set(v.plans["plan_id"].to_list()) == {"mig-test-1", "quota-test-1"}
    assert v.selected == "mig-test-1" and v.status == "proposed" and not v.can_act
    assert v.diff.row(0, named=True)["after"] == "2×3g.40gb"
    assert "$1,387.00" in v.effect["value"].to_list()


def test_sync_offers_lead_only_their_team(shared_app: Any) -> None:
    result = sync(shared_app.data, LEAD_P, "/team", "?period=2026-11", trigger="url", controls=(None, None, None))
    assert result.team_options == [{"label": LEAD_TEAM, "value": LEAD_TEAM}]
    assert result.state.period == PERIOD
    assert {o["value"] for o in result.period_options} == {PERIOD, PREVIOUS}
    changed = sync(shared_app.data, ADMIN_P, "/fleet", "?period=2026-11&node=a100-mig-000", trigger="f-period",
                   controls=(PREVIOUS, None, "H100-80GB"))
    assert changed.search == f"?period={PREVIOUS}&model=H100-80GB"  # a new period drops the node
    fleet_link = [p.path for p in PAGES].index("/fleet")
    assert changed.hrefs[fleet_link] == f"/fleet?period={PREVIOUS}&model=H100-80GB"


def test_csv_download_scoped(shared_app: Any, reference_bills: dict) -> None:
    body, name = bill_csv(shared_app, LEAD_P, {"period": PERIOD})
    frame = pl.read_csv(body.encode())
    assert set(frame["team"].to_list()) == {LEAD_TEAM} and name.endswith(f"{LEAD_TEAM}.csv")
    ref = line(reference_bills[(PERIOD, ("team",))], team=LEAD_TEAM)
    assert float(frame["cost"].sum()) == pytest.approx(ref["cost"], abs=0.01)
    with pytest.raises(PermissionError, match=OTHER_TEAM):
        bill_csv(shared_app, LEAD_P, {"period": PERIOD, "team": OTHER_TEAM})
    with pytest.raises(InputError):
        bill_csv(shared_app, LEAD_P, {"period": "2026-13"})
    everything, _ = bill_csv(shared_app, ADMIN_P, {"period": PERIOD})
    assert {LEAD_TEAM, OTHER_TEAM, "unallocated"} <= set(pl.read_csv(everything.encode())["team"].to_list())


def test_token_costs_match_analytics(shared_app: Any, demo_source: Any) -> None:
    """Per team and model service; summed over teams they are what
    `analytics.workloads.tokens.token_costs` reports for the fleet (tokens, GPU cost, unit costs)."""
    from gpuledger.analytics.workloads.tokens import token_costs
    from gpuledger.warehouse import Warehouse

    mine = shared_app.data.token_costs(PERIOD)
    assert not mine.is_empty() and mine["team"].n_unique() > 1
    with Warehouse.open(demo_source, read_only=True) as wh:
        fleet = token_costs(wh, Period.exact(PERIOD).window, SETTINGS).by_model
    summed = mine.group_by("model_name").agg(
        pl.col("prompt_tokens").sum(), pl.col("generation_tokens").sum(), pl.col("gpu_cost").sum())
    assert sorted(summed["model_name"].to_list()) == sorted(fleet["model_name"].to_list())
    for row in summed.iter_rows(named=True):
        ref = fleet.filter(pl.col("model_name") == row["model_name"]).row(0, named=True)
        for key in ("prompt_tokens", "generation_tokens", "gpu_cost"):
            assert row[key] == pytest.approx(ref[key], rel=1e-9), (row["model_name"], key)
        work = row["prompt_tokens"] + 3 * row["generation_tokens"]
        assert row["gpu_cost"] / work * 1e6 == pytest.approx(ref["cost_per_m_prompt"], rel=1e-9)
    team_view = team.view(ctx(shared_app, LEAD_P))
    assert set(team_view.tokens["model_name"].to_list()) == set(
        mine.filter(pl.col("team") == LEAD_TEAM)["model_name"].to_list())


def test_default_period_ignores_exclusive_end(demo_copy: Any, tmp_path: Any) -> None:
    """An allocation ending exactly at midnight of Dec 1 (end exclusive) is November's data:
    the default period stays 2026-11, not an empty December."""
    from gpuledger.dashboards.readmodel import ReadModel
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.snapshot_store import SnapshotStore

    with Warehouse.open(demo_copy) as wh:
        wh.con.execute(
            "INSERT INTO allocations (ts, end_ts, uuid, gpu_i_id, node, sharing_mode, share)"
            " VALUES ('2026-11-30 23:00:00+00', '2026-12-01 00:00:00+00', 'GPU-x', -1, 'n', 'exclusive', 1.0)")
    store = SnapshotStore(demo_copy, cache_dir=tmp_path / "c")
    data = ReadModel(store, SETTINGS)
    try:
        assert data.periods() == [PERIOD, PREVIOUS]
    finally:
        data.close()
        store.stop()
