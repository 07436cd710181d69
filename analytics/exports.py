"""The JSON documents of bill, idle and recommendations: one shape for the CLI, the HTTP API
(`/api/v1/`) and the notebook facade, so `gpuledger bill --format json` and `/api/v1/bill`
are the same document, and a lead's view is the same document cut to their teams.

`scope_document` is the one rule for what a lead may read of any document: every section of
every schema is declared once in `SECTIONS` as team rows, team-keyed, fleet data or "about"
(schema, window, rules); a lead keeps their teams' rows, fleet data and any section nobody
declared are left out (set to null / empty), and `scope` says which teams the document covers.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date, datetime
from typing import Any

import polars as pl

from gpuledger.core.window import Window


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        return round(value, 6)
    return value


def rows_json(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


TEAM = "team"
"""A list of rows, each naming its `team`: a lead keeps the rows of their teams."""
TEAM_KEYS = "team_keys"
"""A mapping keyed by team: a lead keeps their teams' keys."""
FLEET = "fleet"
"""Fleet data (totals, unallocated capacity, node names): withheld from a lead."""
ABOUT = "about"
"""What the document is (schema, window, currency, rules): the same for every reader."""

SECTIONS: dict[str, dict[str, str]] = {
    "gpuledger.bill/v1": {
        "schema": ABOUT, "period": ABOUT, "start": ABOUT, "end": ABOUT, "currency": ABOUT,
        "by": ABOUT, "redistribution": ABOUT, "mig_share_basis": ABOUT, "price_book_version": ABOUT,
        "source": ABOUT, "newest_sample": ABOUT, "rules": ABOUT, "notes": ABOUT, "unpriced_models": ABOUT,
        "catalog_priced_models": ABOUT,
        "lines": TEAM, "preemption": TEAM,
        "fleet_cost": FLEET, "fleet_card_hours": FLEET, "unallocated": FLEET,
        "unattributed_namespaces": FLEET, "replicas_unknown_nodes": FLEET,
    },
    # Capacity now is for whoever waits for a GPU (issue 35): where a shape fits is no team's
    # cost, so a lead reads all of it (docs/decisions/0200).
    "gpuledger.capacity/v1": {"schema": ABOUT, "cluster": ABOUT, "at": ABOUT, "capacity": ABOUT,
                              "queues": ABOUT},
    "gpuledger.why/v1": {"schema": ABOUT, "cluster": ABOUT, "at": ABOUT, "waiting": TEAM,
                         "by_queue": TEAM, "by_shape": FLEET},
    "gpuledger.idle/v1": {"schema": ABOUT, "start": ABOUT, "end": ABOUT, "by": ABOUT, "workloads": TEAM},
    "gpuledger.recommendations/v1": {
        "schema": ABOUT, "start": ABOUT, "end": ABOUT, "currency": ABOUT, "rules_current": ABOUT,
        "rules_note": ABOUT, "recommendations": TEAM, "saving_by_team": TEAM_KEYS,
        "monthly_saving": FLEET, "profiles": FLEET, "computed": ABOUT, "note": ABOUT,
        "min_monthly_saving": ABOUT, "below_floor": FLEET,
    },
    "gpuledger.budgets/v1": {
        "schema": ABOUT, "period": ABOUT, "currency": ABOUT, "teams": TEAM, "alerts": TEAM,
    },
}
"""Every section of every document a lead may be served, declared once (docs/decisions/0175).
A section not declared here is withheld from a lead: a new section cannot leak by default, it
is invisible to leads until someone decides what it is."""


def scope_document(doc: dict[str, Any], teams: Collection[str] | None) -> dict[str, Any]:
    """`doc` for everyone (`teams` None) or cut to `teams` by its schema's `SECTIONS`: team rows
    and keys of other teams dropped, fleet and undeclared sections set to null (lists: empty),
    and `scope` saying which teams the document covers. A document whose schema declares no
    sections is refused for a lead (`PermissionError`), never passed through."""
    if teams is None:
        return {**doc, "scope": "fleet"}
    sections = SECTIONS.get(str(doc.get("schema")))
    if sections is None:
        raise PermissionError(f"document {doc.get('schema')!r} declares no team scope: fleet readers only")
    keep = set(teams)
    out: dict[str, Any] = {}
    for key, value in doc.items():
        kind = sections.get(key, FLEET)
        if kind == ABOUT:
            out[key] = value
        elif kind == TEAM and isinstance(value, list):
            out[key] = [row for row in value if isinstance(row, dict) and row.get("team") in keep]
        elif kind == TEAM_KEYS and isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if k in keep}
        else:
            out[key] = [] if isinstance(value, list) else {} if isinstance(value, dict) else None
    if doc.get("monthly_saving") is not None and isinstance(out.get("recommendations"), list):
        # the teams' own total: their per-team savings (rows under the advice floor included,
        # as in the fleet total), else their rows; unknown (None, "not computed") stays unknown
        kept, rows = out.get("saving_by_team"), out["recommendations"]
        values = kept.values() if isinstance(kept, dict) else (r.get("monthly_saving") for r in rows)
        out["monthly_saving"] = round(sum(float(v or 0.0) for v in values), 2)
    return {**out, "scope": sorted(keep)}


def scope_bill(doc: dict[str, Any], teams: Collection[str] | None) -> dict[str, Any]:
    """`Bill.to_dict()` for everyone (`teams` None) or cut to `teams` (`scope_document`)."""
    return scope_document(doc, teams)


def idle_json(frame: pl.DataFrame, window: Window, by: str) -> dict[str, Any]:
    return {"schema": "gpuledger.idle/v1", "start": _plain(window.start), "end": _plain(window.end),
            "by": by, "workloads": rows_json(frame)}


def savings_by_team(recs: pl.DataFrame) -> dict[str, float]:
    if recs.is_empty():
        return {}
    grouped = recs.group_by("team").agg(pl.col("monthly_saving").sum()).sort("team", nulls_last=True)
    return {str(t): round(float(s), 2) for t, s in grouped.iter_rows()}


def recommendations_json(recs: pl.DataFrame, window: Window, currency: str,
                         profiles: pl.DataFrame | None = None) -> dict[str, Any]:
    return {
        "schema": "gpuledger.recommendations/v1", "start": _plain(window.start),
        "end": _plain(window.end), "currency": currency,
        "monthly_saving": round(float(recs["monthly_saving"].sum()) if recs.height else 0.0, 2),
        "saving_by_team": savings_by_team(recs),
        "profiles": rows_json(profiles) if profiles is not None else [],
        "recommendations": rows_json(recs),
    }


def filter_teams(frame: pl.DataFrame, teams: Collection[str] | None) -> pl.DataFrame:
    """The rows of `teams` (all rows when None)."""
    return frame if teams is None else frame.filter(pl.col("team").is_in(sorted(teams)))
