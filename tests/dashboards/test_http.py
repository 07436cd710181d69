"""The server side of access, over real HTTP requests to the Flask app (no browser).

Cases:
- production mode: no user header → 401 on pages, the Dash callback endpoint and the download
  route; `/healthz` stays open;
- headers from a peer that is not a configured proxy are ignored → 401;
- an authenticated user without any role → 403;
- the approve button's callback endpoint, posted directly by a lead (as a script would, with
  the button "enabled"): refused, the plan stays `proposed`, the refusal is in the audit log;
  posted by an admin: the plan becomes `approved` (actuator workflow, audit record by ada);
- reject needs a reason; a rejected plan cannot be approved afterwards (actuator's rule shown);
- the page callback posted by a lead for another team returns a refusal, not the numbers;
- the CSV route: a lead gets their team's CSV and 403 for another team; a bad period is 400;
- apply without a dry-run preview is refused, and preview without a cluster says how to set one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuledger.dashboards.app import create_app
from gpuledger.optimizer.plan.store import load_record
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import (
    LEAD_TEAM,
    MIG_PLAN,
    OTHER_TEAM,
    PERIOD,
    QUOTA_PLAN,
    STRANGER,
    admin_headers,
    lead_headers,
    settings_with_roles,
)


@pytest.fixture
def app(demo_copy: Path, tmp_path: Path) -> Any:
    a = create_app(settings_with_roles(), demo_copy, background=False, cache_dir=tmp_path / "cache")
    yield a
    a.close()


def client(app: Any, remote: str = "127.0.0.1") -> Any:
    c = app.server.test_client()
    c.environ_base["REMOTE_ADDR"] = remote
    return c


def callback(app: Any, output_part: str, inputs: dict[str, Any], state: dict[str, Any], changed: str) -> dict:
    """The JSON body the Dash renderer posts for the callback whose output names `output_part`."""
    key = next(k for k in app.dash.callback_map if output_part in k)
    spec = app.dash.callback_map[key]

    def fill(items: list[dict[str, str]], values: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**i, "value": values.get(f"{i['id']}.{i['property']}")} for i in items]

    outputs = [{"id": part.split(".")[0], "property": part.split(".")[1].split("@")[0]}
               for part in key.strip(".").split("...")]
    return {
        "output": key, "outputs": outputs if len(outputs) > 1 else outputs[0],
        "inputs": fill(spec["inputs"], inputs), "state": fill(spec["state"], state),
        "changedPropIds": [changed],
    }


def post(app: Any, body: dict, headers: dict[str, str]) -> Any:
    response = client(app).post("/_dash-update-component", data=json.dumps(body), headers=headers,
                                content_type="application/json")
    app.actions.wait()  # a refusal's audit record is written in the background: let it land
    return response


def status(path: Path, plan_id: str) -> str:
    with Warehouse.open(path, read_only=True) as wh:
        return load_record(wh, plan_id).status


def audit(path: Path, plan_id: str) -> list[tuple[str, str, str]]:
    with Warehouse.open(path, read_only=True) as wh:
        return [tuple(r) for r in wh.query(
            "SELECT actor, action, result FROM audit_log WHERE plan_id = ? ORDER BY seq", [plan_id]).rows()]


def approve_body(plan_id: str) -> dict:
    return {"inputs": {"btn-approve.n_clicks": 1}, "state": {"plan-id.data": plan_id, "bump.data": 0},
            "changed": "btn-approve.n_clicks"}


def test_production_mode_requires_proxy_user(app: Any) -> None:
    c = client(app)
    assert c.get("/team").status_code == 401
    assert c.get("/download/bill.csv?period=2026-11").status_code == 401
    body = callback(app, "page.children", {"view.data": {"page": "/team"}}, {}, "view.data")
    assert post(app, body, {}).status_code == 401
    assert c.get("/healthz").status_code == 200
    assert c.get("/team", headers=admin_headers()).status_code == 200


def test_headers_from_non_proxy_ignored(app: Any) -> None:
    response = client(app, remote="10.9.9.9").get("/team", headers=admin_headers())
    assert response.status_code == 401


def test_user_without_role_is_forbidden(app: Any) -> None:
    response = client(app).get("/team", headers={"X-Forwarded-User": STRANGER})
    assert response.status_code == 403 and STRANGER in response.get_data(as_text=True)


def test_lead_cannot_approve_by_posting_the_callback(app: Any, demo_copy: Path) -> None:
    b = approve_body(MIG_PLAN)
    response = post(app, callback(app, "flash.children", b["inputs"], b["state"], b["changed"]), lead_headers())
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert "Refused" in text and "needs the admin role" in text
    assert status(demo_copy, MIG_PLAN) == "proposed"
    assert ("leo", "plan.approve", "denied") in audit(demo_copy, MIG_PLAN)
    response = post(app, callback(app, "flash.children", b["inputs"], b["state"], b["changed"]), admin_headers())
    assert "approved by ada" in response.get_data(as_text=True)
    assert status(demo_copy, MIG_PLAN) == "approved"
    assert ("ada", "plan.status", "ok") in audit(demo_copy, MIG_PLAN)


def test_reject_needs_reason_and_is_final(app: Any, demo_copy: Path) -> None:
    state = {"plan-id.data": QUOTA_PLAN, "bump.data": 0}
    no_reason = callback(app, "flash.children", {"btn-reject.n_clicks": 1}, state, "btn-reject.n_clicks")
    assert "give a reason" in post(app, no_reason, admin_headers()).get_data(as_text=True)
    assert status(demo_copy, QUOTA_PLAN) == "proposed"
    with_reason = callback(app, "flash.children", {"btn-reject.n_clicks": 1},
                           {**state, "reject-reason.value": "quota too tight"}, "btn-reject.n_clicks")
    assert "rejected by ada" in post(app, with_reason, admin_headers()).get_data(as_text=True)
    assert status(demo_copy, QUOTA_PLAN) == "rejected"
    b = approve_body(QUOTA_PLAN)
    again = post(app, callback(app, "flash.children", b["inputs"], b["state"], b["changed"]), admin_headers())
    assert "only a proposed plan can be approved" in again.get_data(as_text=True)


def test_page_callback_refuses_other_team(shared_app: Any) -> None:
    app = shared_app
    body = callback(app, "page.children", {"view.data": {"page": "/team", "period": PERIOD, "team": OTHER_TEAM}},
                    {}, "view.data")
    text = post(app, body, lead_headers()).get_data(as_text=True)
    assert "refusal" in text and "kpi-cost" not in text
    own = post(app, callback(app, "page.children", {"view.data": {"page": "/team", "period": PERIOD}}, {},
                             "view.data"), lead_headers()).get_data(as_text=True)
    assert "kpi-cost" in own


def test_download_route_scoped(shared_app: Any) -> None:
    app = shared_app
    c = client(app)
    own = c.get(f"/download/bill.csv?period={PERIOD}&team={LEAD_TEAM}", headers=lead_headers())
    assert own.status_code == 200 and own.mimetype == "text/csv"
    assert "attachment" in own.headers["Content-Disposition"]
    other = c.get(f"/download/bill.csv?period={PERIOD}&team={OTHER_TEAM}", headers=lead_headers())
    assert other.status_code == 403
    assert c.get("/download/bill.csv?period=2026-99", headers=lead_headers()).status_code == 400


def test_apply_needs_preview_and_cluster(app: Any, demo_copy: Path) -> None:
    state = {"plan-id.data": MIG_PLAN, "bump.data": 0}
    apply_body = callback(app, "flash.children", {"btn-apply.n_clicks": 1}, state, "btn-apply.n_clicks")
    assert "preview it (dry run) first" in post(app, apply_body, admin_headers()).get_data(as_text=True)
    preview = callback(app, "flash.children", {"btn-preview.n_clicks": 1}, state, "btn-preview.n_clicks")
    assert "no cluster configured" in post(app, preview, admin_headers()).get_data(as_text=True)
    assert "needs the admin role" in post(app, apply_body, lead_headers()).get_data(as_text=True)
    assert status(demo_copy, MIG_PLAN) == "proposed"
