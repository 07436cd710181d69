"""The JSON documents of bill, idle and recommendations: one shape for the CLI, the HTTP API
(`/api/v1/`) and the notebook facade, so `gpuledger bill --format json` and `/api/v1/bill`
are the same document, and a lead's view is the same document cut to their teams.

`scope_bill` is the one rule for what a lead may read of a bill: their teams' lines only; the
fleet totals, the unallocated capacity and the unattributed namespaces are fleet data, so they
are left out (set to null / empty) and `scope` says which teams the document covers.
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


def scope_bill(doc: dict[str, Any], teams: Collection[str] | None) -> dict[str, Any]:
    """`Bill.to_dict()` for everyone (`teams` None) or cut to `teams` (see module docstring)."""
    if teams is None:
        return {**doc, "scope": "fleet"}
    keep = set(teams)
    return {
        **doc, "scope": sorted(keep),
        "lines": [line for line in doc["lines"] if line.get("team") in keep],
        "fleet_cost": None, "fleet_card_hours": None, "unallocated": [],
        "unattributed_namespaces": [],
    }


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
