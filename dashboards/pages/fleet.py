"""Fleet (admins and viewers): how busy the cards are, what is idle, unallocated or unlabeled,
and how the MIG cards are carved up.

Card-hour figures are the bill's `detail` rows aggregated (so they sum to the bill), the
heatmap is the bill's card-hours × active ratio per node and hour over the node's cards
(`dashboards.heat`), and the MIG map places each card's live instances with `core.mig`'s
placement rules.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl
from dash import dcc, html

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.core.errors import InputError
from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, gpu_model
from gpuledger.core.period import Period
from gpuledger.dashboards import figures
from gpuledger.dashboards.access import can_see_fleet
from gpuledger.dashboards.pages.common import (
    PageContext,
    bill_banner,
    graph,
    kpi,
    money,
    number,
    percent,
    refuse,
    rules_warning,
    section,
    table,
    where_data,
)

MIG_NODES_SHOWN = 4


@dataclass(frozen=True)
class FleetView:
    period: str
    model: str | None
    node: str | None
    currency: str
    heat: pl.DataFrame
    heat_row: str
    daily: pl.DataFrame
    totals: dict[str, float]
    unallocated: pl.DataFrame
    unattributed: pl.DataFrame
    unlabeled: pl.DataFrame
    mig_nodes: list[str]
    node_hrefs: dict[str, str]
    all_nodes_href: str
    mig_cells: pl.DataFrame
    mig_at: datetime | None
    empty_note: str | None = None
    """Set when the month holds no card-hours: where data exists instead (as Teams / Team)."""
    bill_notes: tuple[str, ...] = ()
    """The month's bill's notes (`ReadModel.bill_notes`), shown above the numbers."""
    heat_note: str | None = None
    """What the heatmap's hours rest on when not the roll-up under the server's rules
    (`dashboards.heat.HeatHours.notes`): recomputed from raw samples, or shown as stored."""


def daily_hours(detail: pl.DataFrame) -> pl.DataFrame:
    """Per day: allocated, active, allocated-but-idle and unallocated card-hours."""
    if detail.is_empty():
        return pl.DataFrame(schema={
            "day": pl.Date, "allocated_card_hours": pl.Float64, "idle_card_hours": pl.Float64,
            "unallocated_card_hours": pl.Float64, "active_card_hours": pl.Float64,
        })
    unalloc = pl.col("team") == SpecialLine.UNALLOCATED.value
    return (
        detail.group_by("day")
        .agg(
            pl.col("card_hours").filter(~unalloc).sum().alias("allocated_card_hours"),
            pl.col("idle_card_hours").filter(~unalloc).sum().alias("idle_card_hours"),
            pl.col("card_hours").filter(unalloc).sum().alias("unallocated_card_hours"),
        )
        .with_columns((pl.col("allocated_card_hours") - pl.col("idle_card_hours")).alias("active_card_hours"))
        .sort("day")
    )


def mig_cells(instances: pl.DataFrame) -> pl.DataFrame:
    """One row per drawn cell of the MIG map: instances at their placement, then the slices
    no instance covers ("stranded": capacity the current layout cannot hand out).

    1. Group the live instances per GPU and count profiles.
    2. Place the counts with `core.mig` (a valid placement; the real starts are not reported by
       dcgm-exporter, the geometry is what matters for a map).
    3. Give each placement an instance of its profile (in GPU_I_ID order) and its holder's team.
    4. Memory slices left uncovered become one "stranded" cell each run.
    """
    rows: list[dict[str, Any]] = []
    if instances.is_empty():
        return pl.DataFrame(schema={"gpu": pl.String, "start": pl.Int64, "size": pl.Int64,
                                    "owner": pl.String, "label": pl.String, "hover": pl.String})
    per_gpu = instances.group_by(["node", "gpu_index", "model"], maintain_order=True)
    for (node, index, model), group in per_gpu:
        label = f"{node} / GPU {index}"
        members = group.sort("gpu_i_id").to_dicts()
        counts = Counter(m["profile"] for m in members)
        try:
            geometry = gpu_model(str(model))
            layout = geometry.place(dict(counts))
        except InputError:
            continue
        by_profile: dict[str, list[dict[str, Any]]] = {}
        for m in members:
            by_profile.setdefault(m["profile"], []).append(m)
        covered: set[int] = set()
        used_compute = 0
        for placement in sorted(layout, key=lambda p: p.start):
            profile = geometry.profile(placement.profile)
            inst = by_profile[placement.profile].pop(0)
            covered.update(range(placement.start, placement.start + profile.memory))
            used_compute += profile.compute
            owner = inst["team"] or (SpecialLine.UNATTRIBUTED.value if inst["namespace"] else "free")
            holder = f"{inst['namespace']}/{inst['pod']}" if inst["pod"] else "nobody"
            rows.append({
                "gpu": label, "start": placement.start, "size": profile.memory, "owner": owner,
                "label": placement.profile,
                "hover": f"{placement.profile} (GPU_I_ID {inst['gpu_i_id']}) held by {holder}",
            })
        stranded = COMPUTE_SLICES - used_compute
        start = None
        for slot in range(MEMORY_SLICES + 1):
            free = slot < MEMORY_SLICES and slot not in covered
            if free and start is None:
                start = slot
            elif not free and start is not None:
                rows.append({
                    "gpu": label, "start": start, "size": slot - start, "owner": "stranded",
                    "label": "stranded",
                    "hover": f"memory slices {start}-{slot - 1} in no instance; "
                             f"{stranded} of 7 compute slices unused",
                })
                start = None
    return pl.DataFrame(rows, schema={"gpu": pl.String, "start": pl.Int64, "size": pl.Int64,
                                      "owner": pl.String, "label": pl.String, "hover": pl.String})


def _aggregates(
    bill: Any, model: str | None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, float]]:
    """The card-hour figures of the page, from the bill's detail (optionally one model)."""
    detail: pl.DataFrame = bill.detail
    if model:
        detail = detail.filter(pl.col("model") == model)
    daily = daily_hours(detail)
    unallocated = (
        detail.filter(pl.col("team") == SpecialLine.UNALLOCATED.value)
        .with_columns(pl.col("pool").fill_null("(no pool)"))
        .group_by("pool", "model").agg(pl.col("card_hours").sum(), pl.col("cost").sum())
        .sort("card_hours", descending=True)
    )
    unattributed = (
        detail.filter(pl.col("team") == SpecialLine.UNATTRIBUTED.value)
        .group_by("namespace")
        .agg(pl.col("card_hours").sum(), pl.col("idle_card_hours").sum(), pl.col("cost").sum())
        .sort("cost", descending=True)
    )
    totals = {
        "fleet_cost": float(bill.fleet_cost) if not model else float(detail["cost"].sum()),
        "card_hours": float(detail["card_hours"].sum()),
        "allocated": float(daily["allocated_card_hours"].sum()),
        "idle": float(daily["idle_card_hours"].sum()),
        "unallocated": float(daily["unallocated_card_hours"].sum()),
    }
    if not model:
        from gpuledger.analytics.billing.overview import waste_headline

        totals |= {f"waste_{k}": v for k, v in waste_headline(bill).items()}
    return daily, unallocated, unattributed, totals


def view(ctx: PageContext) -> FleetView:
    if not can_see_fleet(ctx.principal):
        refuse(ctx.principal, "the fleet page (admins and viewers only)")
    data, state = ctx.data, ctx.state
    if state.node and state.node not in data.nodes()["node"].to_list():
        state = state.with_(node=None)  # an unknown node from the URL: show the whole fleet
        ctx = PageContext(ctx.principal, state, data, ctx.settings)
    heat = data.fleet_heat(state.period)
    heat_row = "node"
    if state.node:
        heat = data.gpu_heat(state.period, state.node).with_columns(
            pl.format("GPU {}", pl.col("gpu_index")).alias("gpu")
        )
        heat_row = "gpu"
    elif state.model:
        heat = heat.filter(pl.col("model") == state.model)
    daily, unallocated, unattributed, totals = data.memo(
        ("fleet", state.period, state.model), lambda: _aggregates(data.bill(state.period), state.model)
    )
    mig_nodes, cells, at = _mig(ctx)
    return FleetView(
        period=state.period, model=state.model, node=state.node, currency=ctx.currency, heat=heat,
        heat_row=heat_row, daily=daily, totals=totals, unallocated=unallocated,
        unattributed=unattributed, unlabeled=data.unlabeled_namespaces(), mig_nodes=mig_nodes,
        node_hrefs={n: state.with_(node=n).href("/fleet") for n in mig_nodes},
        all_nodes_href=state.with_(node=None).href("/fleet"), mig_cells=cells, mig_at=at,
        empty_note=None if totals["card_hours"] else where_data(ctx),
        bill_notes=tuple(data.bill_notes(state.period)),
        heat_note=" ".join(data.heat_notes(state.period)) or None,
    )


def _mig(ctx: PageContext) -> tuple[list[str], pl.DataFrame, datetime | None]:
    """MIG nodes (of the model filter) and the map cells of the chosen or first few nodes,
    as of the end of the period (or the data's end, for the running month)."""
    nodes = ctx.data.nodes()
    mig = nodes.filter(pl.col("sharing_mode") == "mig")
    if ctx.state.model:
        mig = mig.filter(pl.col("model") == ctx.state.model)
    names = mig["node"].to_list()
    if not names:
        return [], mig_cells(pl.DataFrame()), None
    chosen = [ctx.state.node] if ctx.state.node in names else names[:MIG_NODES_SHOWN]
    month = Period.exact(ctx.state.period).window
    span = ctx.data.data_range()
    at = min(month.end, span[1]) if span is not None else month.end
    if at == month.end:
        at -= month.step
    cells = ctx.data.memo(
        ("mig_cells", tuple(chosen), at.isoformat()),
        lambda: mig_cells(ctx.data.mig_instances(at).filter(pl.col("node").is_in(chosen))),
    )
    return names, cells, at


def _kpis(v: FleetView, scope: str) -> html.Div:
    cur, t = v.currency, v.totals
    return html.Div(
        [
            kpi("Fleet cost", money(t["fleet_cost"], cur), scope, id="kpi-fleet-cost", raw=t["fleet_cost"]),
            kpi("Allocated GPU-hours", number(t["allocated"]),
                f"{percent(t['allocated'] / t['card_hours']) if t['card_hours'] else '–'} of capacity",
                id="kpi-allocated", raw=t["allocated"]),
            kpi("Allocated but idle", number(t["idle"]),
                f"{percent(t['idle'] / t['allocated']) if t['allocated'] else '–'} of allocated",
                id="kpi-idle", raw=t["idle"]),
            kpi("Unallocated GPU-hours", number(t["unallocated"]), "capacity nobody held",
                id="kpi-unallocated", raw=t["unallocated"]),
        ],
        className="kpis",
    )


def render(v: FleetView, advice: Any = None) -> html.Div:
    cur = v.currency
    scope = v.period + (f" · {v.model}" if v.model else "")
    heat_title = (
        f"GPU activity per GPU and hour on {v.node} · {v.period}" if v.node
        else f"GPU activity per node and hour · {scope}"
    )
    kpis = _kpis(v, scope)
    unattributed = table(
        v.unattributed,
        [("namespace", "namespace"), ("card_hours", "GPU-hours"), ("idle_card_hours", "idle GPU-hours"),
         ("cost", f"cost ({cur})")],
        id="unattributed-table", formats={"cost": lambda x: money(x, cur)},
    )
    unlabeled = table(v.unlabeled, [("namespace", "namespace without a team label")], id="unlabeled-table")
    mig_title = "MIG layout map" + (f" · {v.mig_at:%Y-%m-%d %H:%M} UTC" if v.mig_at else "")
    node_links = html.Div(
        [html.Span("MIG nodes: ")] + [
            dcc.Link(n, href=v.node_hrefs[n], className="chip") for n in v.mig_nodes[:40]
        ],
        className="chips", id="mig-node-links",
    )
    drill = (
        html.Div([dcc.Link("← all nodes", href=v.all_nodes_href, id="all-nodes")], className="muted")
        if v.node else html.Div("Click a node's row for its GPUs.", className="muted")
    )
    return html.Div(
        [
            _waste(v),
            *([html.P(v.empty_note, className="empty", id="empty-period")] if v.empty_note else []),
            *bill_banner(v.bill_notes, "fleet-bill-notes"),
            *rules_warning(v.heat_note, "fleet-heat-rules"),
            graph(figures.heatmap(v.heat, v.heat_row, heat_title), "fleet-heatmap"),
            drill,
            kpis,
            graph(figures.fleet_hours(v.daily), "fleet-hours"),
            html.Div(
                [
                    section("Unallocated capacity", graph(figures.unallocated(v.unallocated, cur),
                                                          "fleet-unallocated")),
                    section("Unattributed usage", unattributed, html.H4("Namespaces missing a team label"),
                            unlabeled),
                ],
                className="grid2",
            ),
            section(mig_title, graph(figures.mig_map(v.mig_cells, "Instances, owners and stranded slices"),
                                     "fleet-mig-map"), node_links),
            *([advice] if advice is not None else []),
        ],
        id="fleet-page",
    )


def _waste(v: FleetView) -> Any:
    """The headline: unallocated capacity + teams' idle time, in money and share of the cost."""
    t, cur = v.totals, v.currency
    if "waste_waste" not in t:
        return html.Div(id="fleet-waste")
    attrs: dict[str, Any] = {"data-value": repr(float(t["waste_waste"]))}
    return html.P(
        [html.B(f"{money(t['waste_unallocated'], cur)} unallocated + {money(t['waste_idle'], cur)} idle = "
                f"{money(t['waste_waste'], cur)}"),
         f", {percent(t['waste_share'])} of the fleet cost ({money(t['fleet_cost'], cur)}) paid for GPUs "
         "that did no work."],
        id="fleet-waste", className="headline", **attrs,
    )


def show(ctx: PageContext) -> html.Div:
    """The page for the registry (`dashboards.registry`), with the fleet advice (issue #19)."""
    from gpuledger.dashboards.pages.advice_panels import fleet_section

    v = view(ctx)
    return render(v, fleet_section(ctx))
