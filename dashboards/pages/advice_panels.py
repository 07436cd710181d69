"""Fleet advice on the Fleet and Plans pages (issue #19): the rows of `recommend --kind ...`.

The numbers are the advice kinds' own (`analytics.advice.KINDS`), computed once per
snapshot and month through the read model (`ReadModel.advice`), so a page shows exactly what
`gpuledger recommend --kind K --period P -o json` prints for the same warehouse. This module
only picks and lays out: the headline rows of every kind and the latest fragmentation rate per
node and pool against `advice.fragmentation_threshold` (Fleet), and the advice a plan reviewer
weighs beside the plans (catalog, overcommit, autoscaling with its HPA manifest: Plans).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
from dash import html

from gpuledger.dashboards.pages.common import (
    PageContext,
    money,
    percent,
    results_note,
    rules_warning,
    section,
    table,
)
from gpuledger.dashboards.pages.grid import grid
from gpuledger.dashboards.serving_results import FLEET_KINDS, PLANS_KINDS

ROW_SCHEMA: dict[str, Any] = {"kind": pl.String, "scope": pl.String, "current": pl.String,
                              "recommended": pl.String, "monthly_saving": pl.Float64, "reason": pl.String}
RATE_COLUMNS = ("node", "pool", "free_slices", "unusable_slices", "slices", "rate")
UNPRICED = "not priced"
"""A risk row's saving cell (`actionable`: unknown, never $0.00)."""


@dataclass(frozen=True)
class AdviceView:
    period: str
    currency: str
    rows: pl.DataFrame
    threshold: float
    node_rates: pl.DataFrame
    pool_rates: pl.DataFrame
    manifests: dict[str, str]
    """HPA manifest per serving Deployment (`namespace/deployment`) with an autoscaling row."""
    rules_note: str | None = None
    """Set when a stored kind was computed under other rules than the server's (0150)."""
    quiet: tuple[str, ...] = ()
    """The rows under the saving floor, counted per kind ("94 Deployments already right-sized")."""
    missing: tuple[str, ...] = ()
    """Kinds not computed yet for the month (no rows, no zero: `serving_results.NOT_COMPUTED`)."""
    total: float = 0.0
    """What acting on the listed rows saves a month (`actionable.Shown.total`: the rows not
    listed and the unpriced risks are not in it)."""
    floor: float = 0.0
    """`advice.min_monthly_saving`."""


def advice_view(ctx: PageContext, kinds: tuple[str, ...]) -> AdviceView:
    """The rows of `kinds` for the page's month, and the fragmentation rates when asked."""
    from gpuledger.analytics.advice.actionable import floor_of, quiet_lines, split

    period = ctx.state.period
    every = [ctx.data.advice(period, k) for k in kinds]
    missing = tuple(a.kind for a in every if "not_computed" in a.document)
    found = [a for a in every if a.kind not in missing]
    computed = [r for a in found for r in a.rows]
    floor = floor_of(ctx.settings)
    shown = split(computed, floor)
    rows = pl.DataFrame(shown.rows, schema=ROW_SCHEMA)
    docs = {a.kind: a.document for a in found}
    frag = docs.get("fragmentation", {})
    scaled = set(rows.filter(pl.col("kind") == "autoscaling")["scope"].to_list())
    manifests = {f"{d['namespace']}/{d['deployment']}": str(d["manifest"])
                 for d in docs.get("autoscaling", {}).get("deployments", [])
                 if f"{d['namespace']}/{d['deployment']}" in scaled}
    threshold = float(frag.get("threshold", ctx.settings.advice.fragmentation_threshold))
    return AdviceView(period, ctx.currency, rows, threshold, _latest(frag.get("nodes", []), "node"),
                      _latest(frag.get("pools", []), "pool"), manifests,
                      results_note(ctx, [f"advice:{k}" for k in kinds]),
                      tuple(quiet_lines(shown.quiet, ctx.currency)), missing,
                      shown.total, floor)


def _latest(records: list[dict[str, Any]], key: str) -> pl.DataFrame:
    """The last observed rate per node (or pool) from a kind document's JSON rows."""
    columns = [c for c in RATE_COLUMNS if c != "node" or key == "node"]
    if not records:
        return pl.DataFrame(schema={c: pl.String if c in ("node", "pool") else pl.Float64 for c in columns})
    frame = pl.DataFrame(records)
    return (frame.filter(pl.col("ts") == pl.col("ts").max().over(key)).select(columns)
            .sort("rate", key, descending=[True, False]))


def _rows_table(v: AdviceView, id: str) -> html.Div:
    """The actionable rows (largest saving first), then what was counted instead of listed and
    which kinds are not computed yet: never a row of 0 for either."""
    from gpuledger.dashboards.serving_results import NOT_COMPUTED

    notes = [html.P(f"Not listed (saving under {money(v.floor, v.currency)}/month): {line}",
                    className="muted quiet") for line in v.quiet]
    if v.missing:
        notes.append(html.P(f"{', '.join(v.missing)}: {NOT_COMPUTED}", className="unknown",
                            id=f"{id}-missing"))
    columns = [("monthly_saving", f"saving / month ({v.currency})"), ("kind", "kind"), ("scope", "scope"),
               ("recommended", "recommended"), ("current", "current"), ("reason", "reason")]
    listed = (html.P("nothing worth acting on this month", className="empty", id=id) if v.rows.is_empty()
              else grid(v.rows, columns, id=id, money_columns=("monthly_saving",), currency=v.currency,
                        unknown=UNPRICED, column_options={"reason": {"minWidth": 320}}))  # read whole
    unknown = v.rows.filter(pl.col("monthly_saving").is_null()).height  # risks, DRA device classes
    unpriced = f" ({unknown:,} {UNPRICED}, not in the sum)" if unknown else ""
    return html.Div([
        html.P(f"{v.rows.height:,} worth acting on, together {money(v.total, v.currency)}/month{unpriced}",
               className="muted", id=f"{id}-summary",
               **_data_value(v.total)) if not v.missing or v.total else html.Span(),
        listed, *notes])


def _rates_table(frame: pl.DataFrame, threshold: float, id: str) -> html.Div:
    marked = frame.with_columns(
        pl.when(pl.col("rate") >= threshold - 1e-12).then(pl.lit("at or above")).otherwise(pl.lit("below"))
        .alias("against")) if not frame.is_empty() else frame
    cols = [(c, c.replace("_", " ")) for c in frame.columns]
    if "against" in marked.columns:
        cols.append(("against", "threshold"))
    return table(marked, cols, id=id, formats={"rate": percent}, limit=200)


def _data_value(value: float) -> dict[str, Any]:
    return {"data-value": repr(value)}


def fleet_section(ctx: PageContext) -> html.Section:
    """Fleet: every kind's headline rows and the fragmentation per node and pool."""
    v = advice_view(ctx, FLEET_KINDS)
    return section(
        f"Fleet advice · {v.period}",
        *rules_warning(v.rules_note, "fleet-advice-rules"),
        html.P(f"MIG fragmentation (share of free slices the smallest demanded profile cannot use) "
               f"at the latest hour, against the threshold {percent(v.threshold)} "
               "(advice.fragmentation_threshold).",
               className="muted", id="fragmentation-threshold", **_data_value(v.threshold)),
        html.Div([
            html.Div([html.H4("Per node"), _rates_table(v.node_rates, v.threshold, "fragmentation-nodes")]),
            html.Div([html.H4("Per pool"), _rates_table(v.pool_rates, v.threshold, "fragmentation-pools")]),
        ], className="grid2"),
        html.H4("Recommendations (`gpuledger recommend --kind ...`)"),
        _rows_table(v, "fleet-advice-table"),
        id="fleet-advice",
    )


def plans_section(ctx: PageContext) -> html.Section:
    """Plans: the catalog, overcommit and autoscaling advice, with each HPA manifest."""
    v = advice_view(ctx, PLANS_KINDS)
    manifests = [html.Details([html.Summary(f"HPA for {scope}"), html.Pre(text, id=f"manifest-{i}")])
                 for i, (scope, text) in enumerate(sorted(v.manifests.items()))]
    return section(f"Advice beside the plans · {v.period}",
                   *rules_warning(v.rules_note, "plans-advice-rules"),
                   _rows_table(v, "plans-advice-table"), *manifests, id="plans-advice")
