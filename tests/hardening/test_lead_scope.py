"""Issue 31 item 1: a lead reads nothing of another team, in any section of any answer.

Cases (a real dashboard server over HTTP, the demo warehouse, a lead of `nlp`):
- every `/api/v1/` document a lead may read: each section is either "about" (the same for
  every reader), team rows whose `team` is the lead's, a team-keyed mapping with only the lead's
  keys, or empty; the bill's `preemption` (33 entries for 13 teams on the issue's fleet) holds
  only the lead's rows, and the admin's holds other teams (so the check can fail);
- the bill document's every key is declared in `exports.SECTIONS`: a new section fails here
  until someone decides whether a lead may see it, and an undeclared one is withheld meanwhile;
- the bill CSV and the Teams CSV downloads hold only the lead's team's rows.
"""

from __future__ import annotations

import csv
import io
import urllib.error
import urllib.request
from typing import Any

import pytest

from gpuledger.analytics import exports
from gpuledger.dashboards.app import RunningServer
from tests.dashboards import conftest as _dash
from tests.dashboards.conftest import (
    LEAD_TEAM,
    PERIOD,
    admin_headers,
    lead_headers,
)
from tests.dashboards.test_api import api, get

demo_source = _dash.demo_source  # the dashboards' demo warehouse fixture, shared
__all__ = ["api", "demo_source"]  # fixtures: the API server of tests/dashboards/test_api.py


def _leaks(doc: dict[str, Any]) -> list[str]:
    """The sections of `doc` that show a lead of LEAD_TEAM anything of another team or the fleet."""
    leaks = []
    for key, value in doc.items():
        if key in ("scope", "schema", "start", "end", "period", "currency", "by", "rules", "source",
                   "redistribution", "mig_share_basis", "price_book_version", "newest_sample",
                   "unpriced_models", "catalog_priced_models", "rules_current", "rules_note", "notes",
                   "computed", "note", "min_monthly_saving"):
            continue
        if value in (None, [], {}):
            continue
        if isinstance(value, list) and all(isinstance(r, dict) and r.get("team") == LEAD_TEAM for r in value):
            continue
        if isinstance(value, dict) and set(value) == {LEAD_TEAM}:
            continue
        if key == "monthly_saving":
            continue  # checked against the rows below
        leaks.append(key)
    return leaks


@pytest.mark.parametrize("path", ["bill", "bill?by=team,model", "idle?top=5000", "recommendations"])
def test_every_section_scoped(api: RunningServer, path: str) -> None:
    sep = "&" if "?" in path else "?"
    status, doc = get(api, f"/api/v1/{path}{sep}period={PERIOD}", lead_headers())
    assert status == 200, doc
    assert _leaks(doc) == []
    assert doc["scope"] == [LEAD_TEAM]
    if "recommendations" in doc:  # the lead's own total: their teams' savings, rows under the floor too
        own = sum(r["monthly_saving"] for r in doc["recommendations"])
        assert doc["monthly_saving"] == pytest.approx(sum(doc["saving_by_team"].values()), abs=0.01)
        assert doc["monthly_saving"] >= own - 0.01


def test_preemption_scoped_where_admin_sees_all(api: RunningServer) -> None:
    _, fleet = get(api, f"/api/v1/bill?period={PERIOD}", admin_headers())
    others = {row["team"] for row in fleet["preemption"]} - {LEAD_TEAM}
    assert others, "the demo must have other teams' preemption for this test to mean anything"
    _, mine = get(api, f"/api/v1/bill?period={PERIOD}", lead_headers())
    assert {row["team"] for row in mine["preemption"]} <= {LEAD_TEAM}
    assert len(mine["preemption"]) == sum(1 for row in fleet["preemption"] if row["team"] == LEAD_TEAM)


def test_every_bill_section_declared(api: RunningServer) -> None:
    _, doc = get(api, f"/api/v1/bill?period={PERIOD}", admin_headers())
    undeclared = set(doc) - {"scope"} - set(exports.SECTIONS["gpuledger.bill/v1"])
    assert undeclared == set(), f"declare {sorted(undeclared)} in analytics/exports.py SECTIONS"
    forged = {**doc, "scope": None, "new_fleet_section": {"vision": 12.5}}
    assert exports.scope_document(forged, {LEAD_TEAM})["new_fleet_section"] == {}
    with pytest.raises(PermissionError):
        exports.scope_document({"schema": "gpuledger.unknown/v1", "x": 1}, {LEAD_TEAM})


def _csv(api: RunningServer, path: str) -> list[dict[str, str]]:
    request = urllib.request.Request(api.url + path, headers=lead_headers())
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return list(csv.DictReader(io.StringIO(answer.read().decode())))
    except urllib.error.HTTPError as exc:  # pragma: no cover - the failure message
        raise AssertionError(f"{path}: {exc.code} {exc.read()[:200]!r}") from None


@pytest.mark.parametrize("path", [f"/download/bill.csv?period={PERIOD}", f"/download/teams.csv?period={PERIOD}"])
def test_csv_scoped(api: RunningServer, path: str) -> None:
    rows = _csv(api, path)
    assert rows and {row["team"] for row in rows} == {LEAD_TEAM}
