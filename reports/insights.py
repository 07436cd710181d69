"""Top idle allocations and recommendations for the statements.

Both come from analytics (`analytics.idle`, `analytics.recommend`); this module only turns
their frames into the small rows a statement shows, per team and fleet-wide.
"""

from __future__ import annotations

import polars as pl

from core.config import Settings
from core.window import Window
from reports.statement import IdleRow, Recommendation
from warehouse import Warehouse

NOT_A_HOLDER = ("unallocated",)


def _device(model: str | None, profile: str | None, uuid: str | None, gi: int | None) -> str:
    short = (uuid or "").removeprefix("GPU-")[:8]
    if profile and gi is not None and gi >= 0:
        return f"{model} {profile} · {short}/{gi}"
    return f"{model} · {short}"


def idle_allocations(detail: pl.DataFrame) -> list[IdleRow]:
    """Every allocation that sat idle this month, largest idle cost first.

    Aggregated from the bill's detail (so the idle numbers on a statement add up to the idle
    column of the same bill): one row per holder x device over the month.
    """
    held = detail.filter(~pl.col("team").is_in(list(NOT_A_HOLDER)) & (pl.col("idle_card_hours") > 0))
    if held.height == 0:
        return []
    keys = ["team", "namespace", "pod", "uuid", "gpu_i_id", "model", "profile"]
    grouped = (
        held.group_by(keys, maintain_order=True)
        .agg(
            pl.col("idle_card_hours").sum(),
            pl.col("idle_cost").sum(),
            ((pl.col("active_ratio").fill_null(0.0) * pl.col("card_hours")).sum()
             / pl.col("card_hours").sum()).alias("active_ratio"),
        )
        .sort(["idle_cost", "team", "namespace", "pod"], descending=[True, False, False, False],
              nulls_last=True)
    )
    return [
        IdleRow(
            team=str(r["team"]),
            holder=f"{r['namespace']}/{r['pod']}" if r["pod"] else str(r["namespace"]),
            device=_device(r["model"], r["profile"], r["uuid"], r["gpu_i_id"]),
            idle_card_hours=float(r["idle_card_hours"]),
            idle_cost=float(r["idle_cost"]),
            active_ratio=None if r["active_ratio"] is None else float(r["active_ratio"]),
        )
        for r in grouped.iter_rows(named=True)
    ]


def top_idle(rows: list[IdleRow], team: str | None, limit: int = 10) -> list[IdleRow]:
    """The team's (or the fleet's) largest idle allocations, largest idle cost first."""
    return [r for r in rows if team is None or r.team == team][:limit]


def recommendations(wh: Warehouse, window: Window, settings: Settings) -> list[Recommendation]:
    """Right-sizing recommendations with their savings, largest first."""
    try:  # TEMP until analytics.recommend lands
        from analytics.recommend import recommend
    except ImportError:
        return []

    found = recommend(wh, window, settings)
    rows = [_recommendation(r) for r in _records(found)]
    return sorted(rows, key=lambda r: (-r.monthly_savings, r.team or "", r.action))


def _records(found: object) -> list[dict[str, object]]:
    if isinstance(found, pl.DataFrame):
        return found.to_dicts()
    out = []
    for item in found:  # type: ignore[attr-defined]
        if isinstance(item, dict):
            out.append(item)
        elif hasattr(item, "model_dump"):
            out.append(item.model_dump())
        else:
            out.append(dict(vars(item)))
    return out


def _recommendation(r: dict[str, object]) -> Recommendation:
    savings = r.get("monthly_savings", r.get("savings", 0.0))
    return Recommendation(
        team=None if r.get("team") is None else str(r.get("team")),
        action=str(r.get("action") or r.get("kind") or "recommendation"),
        detail=str(r.get("detail") or r.get("reason") or ""),
        monthly_savings=float(savings or 0.0),  # type: ignore[arg-type]
    )


def top_recommendations(
    rows: list[Recommendation], team: str | None, limit: int = 10
) -> list[Recommendation]:
    return [r for r in rows if team is None or r.team == team][:limit]
