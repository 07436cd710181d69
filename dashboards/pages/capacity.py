"""Capacity now: what is free right now in each shape, per cluster, pool and GPU model, and each
ClusterQueue's headroom per flavor: the page the person waiting for a GPU opens (issue 35).

Why it reads the API's document: "free" has one definition (`analytics.capacity.now`, the
scheduler's fit sum; decision 0200) and one composition (`analytics.waiting.fleet`), and the
page shows what `/api/v1/capacity` and `gpuledger capacity -o json` answer, for the same
snapshot (`dashboards.capacity_data.served_capacity`). Access is the API's, on the server: the
request's teams by `dashboards.access.scope` (a lead naming another team is refused), the document
cut by `analytics.exports.scope_document` (capacity is no team's cost, so a lead reads all of it,
as the API gives a lead; decision 0240).

What it says about time: the inventory time of the document (`at`, the newest node inventory),
with the banner's staleness rule (`warehouse.queries.freshness.is_stale`: older than two
collection intervals) and wording.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import polars as pl
from dash import html

from gpuledger.analytics.capacity.now import HAMI_MEM, shape_kind, shape_unit
from gpuledger.dashboards.access import scope
from gpuledger.dashboards.pages.common import PageContext, kpi, number, section
from gpuledger.dashboards.pages.freshness import newest_sample_of, stale_warning
from gpuledger.dashboards.pages.grid import grid

SHAPE_COLUMNS = (("cluster", "cluster"), ("pool", "pool"), ("model", "GPU model"), ("kind", "kind"),
                 ("shape", "shape"), ("ready", "ready now"), ("unit", "counted in"),
                 ("placeable", "placeable (MIG cards)"), ("where", "where"))
QUEUE_COLUMNS = (("cluster_queue", "ClusterQueue"), ("cohort", "cohort"), ("flavor", "flavor"),
                 ("resource", "resource"), ("nominal", "nominal"), ("used", "used"), ("free", "free"),
                 ("borrowable", "borrowable"), ("lendable", "lendable"), ("borrowers", "who borrows"))
SHAPE_SCHEMA = {"cluster": pl.String, "pool": pl.String, "model": pl.String, "kind": pl.String,
                "shape": pl.String, "ready": pl.Float64, "unit": pl.String, "placeable": pl.Int64,
                "where": pl.String}
QUEUE_SCHEMA = {k: pl.String if k in ("cluster_queue", "cohort", "flavor", "resource", "borrowers")
                else pl.Float64 for k, _ in QUEUE_COLUMNS}
KPIS = (("whole GPU", "whole GPUs ready", "kpi-capacity-whole"),
        ("MIG", "MIG instances ready", "kpi-capacity-mig"),
        ("time-slice", "time-slice replicas ready", "kpi-capacity-timeslice"),
        ("DRA", "DRA devices free", "kpi-capacity-dra"))
WIDE = {"shape": {"minWidth": 170}, "resource": {"minWidth": 200}, "where": {"minWidth": 300},
        "cluster_queue": {"minWidth": 140}}  # its header whole, not "ClusterQu" / "eue"
"""Columns whose values are read whole (a shape, a resource name), not cut to "nvidia.com/…"."""
MEANING = ("Ready now: the nodes' allocatable minus the requests of the pods running on them "
           "(kube-scheduler's own sum), so a pod asking for it would be placed. Placeable: MIG cards "
           "where the profile fits beside the card's instances, by a layout change (MIG Manager), "
           "not counted as ready. HAMi memory and cores are per card: a pod takes both from one "
           "card, so the row shows the best card's, never a sum. A free card still waits on its "
           "ClusterQueue: a job starts when its queue has free or borrowable quota too.")


@dataclass(frozen=True)
class CapacityView:
    cluster: str
    at: datetime | None
    simulated: bool
    shapes: pl.DataFrame
    queues: pl.DataFrame
    totals: Mapping[str, float]
    """Per kind (`analytics.capacity.now.shape_kind`): ready summed over rows; `hami` the most
    memory (MiB) one HAMi card has left."""
    placeable_cards: int


def _where(row: Mapping[str, Any]) -> str:
    """The cards (per-card shapes, most left first, with their amount) grouped by node, each card
    by its UUID's first block as `nvidia-smi -L` users know it ("GPU-cae1207c"; the API has the
    whole), or the nodes."""
    if not row["per_card"]:
        return ", ".join(row["nodes"])
    by_node: dict[str, list[str]] = {}
    for c in row["per_card"]:
        node, _, card = str(c["card"]).rpartition("/")
        by_node.setdefault(node, []).append(f"{'-'.join(card.split('-')[:2])} ({number(c['free'], 0)})")
    return "; ".join(f"{node}: {', '.join(cards)}" if node else ", ".join(cards)
                     for node, cards in by_node.items())


def shape_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The document's `capacity` rows, one per (cluster, pool, model, shape), with kind and unit."""
    return pl.DataFrame([{"cluster": r["cluster"], "pool": r["pool"], "model": r["model"],
                          "kind": shape_kind(r["shape"]), "shape": r["shape"], "ready": r["ready"],
                          "unit": shape_unit(r["shape"]), "placeable": r["placeable"], "where": _where(r)}
                         for r in rows], schema=SHAPE_SCHEMA)


def queue_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The document's `queues` rows (headroom per ClusterQueue, flavor and resource)."""
    return pl.DataFrame([{**{k: r.get(k) for k, _ in QUEUE_COLUMNS},
                          "borrowers": ", ".join(r["borrowers"])} for r in rows], schema=QUEUE_SCHEMA)


def _totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out = {kind: 0.0 for kind, _, _ in KPIS}
    for r in rows:
        kind = shape_kind(r["shape"])
        if kind in out:
            out[kind] += float(r["ready"])
    out["hami"] = max((float(r["ready"]) for r in rows if r["shape"] == HAMI_MEM), default=0.0)
    return out


def _stamp(text: str | None) -> datetime | None:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if text else None


def view(ctx: PageContext) -> CapacityView:
    """The API's capacity document for this reader (scope checked here, on the server)."""
    from gpuledger.analytics.exports import scope_document
    from gpuledger.dashboards.capacity_data import served_capacity

    teams = scope(ctx.principal, ctx.state.team)
    doc = scope_document(served_capacity(ctx.data, ctx.settings), teams)
    rows = doc["capacity"] or []
    return CapacityView(cluster=doc["cluster"], at=_stamp(doc["at"]),
                        simulated=newest_sample_of(ctx.data).simulated, shapes=shape_frame(rows),
                        queues=queue_frame(doc["queues"] or []), totals=_totals(rows),
                        placeable_cards=sum(int(r["placeable"]) for r in rows))


def inventory_line(at: datetime | None, now: datetime, simulated: bool = False) -> html.P:
    """When the inventory was observed, and the banner's "Stale" warning past two collection
    intervals (`pages.freshness.stale_warning`, said of the inventory)."""
    if at is None:
        return html.P(html.Span("No node inventory in the warehouse yet: nothing to say is free.",
                                id="capacity-stale", className="warning"), id="capacity-at")
    if simulated:
        return html.P(f"Simulated inventory at {at:%Y-%m-%d %H:%M:%S} UTC (complete, nothing collects more).",
                      id="capacity-at")
    return html.P([f"Inventory as of {at:%Y-%m-%d %H:%M:%S} UTC (newest node inventory).",
                   *stale_warning(at, now, "inventory", "capacity-stale")], id="capacity-at")


def _kpis(v: CapacityView) -> html.Div:
    cards = [kpi(label, number(v.totals[kind], 0), id=id_, raw=v.totals[kind]) for kind, label, id_ in KPIS]
    cards.append(kpi("MIG placements open", f"{v.placeable_cards:,}", "card × profile, by a layout change",
                     id="kpi-capacity-placeable", raw=v.placeable_cards))
    cards.append(kpi("HAMi memory on the best card", f"{number(v.totals['hami'], 0)} MiB",
                     id="kpi-capacity-hami", raw=v.totals["hami"]))
    return html.Div(cards, className="kpis", id="capacity-kpis")


def render(v: CapacityView, now: datetime) -> html.Div:
    shapes = (grid(v.shapes, SHAPE_COLUMNS, id="capacity-table", file_name=f"capacity-{v.cluster}.csv",
                   highest_first=True, column_options=WIDE) if not v.shapes.is_empty()
              else html.P("Nothing is free now in any shape.", className="empty", id="capacity-table"))
    queues = (grid(v.queues, QUEUE_COLUMNS, id="capacity-queues", file_name=f"queue-headroom-{v.cluster}.csv",
                   column_options=WIDE)
              if not v.queues.is_empty()
              else html.P("No ClusterQueue quota is stored (Kueue not in use, or not collected).",
                          className="empty", id="capacity-queues"))
    return html.Div([
        inventory_line(v.at, now, v.simulated),
        _kpis(v),
        section(f"Free now by shape · cluster {v.cluster}", shapes,
                html.P(MEANING, className="hint", id="capacity-meaning"), id="capacity-shapes"),
        section("Queue headroom per flavor (Kueue ClusterQueues)", queues, id="capacity-headroom"),
    ], id="capacity-page")


def show(ctx: PageContext) -> html.Div:
    """The page for the registry (`dashboards.registry`)."""
    from gpuledger.core.config import utcnow

    return render(view(ctx), utcnow())
