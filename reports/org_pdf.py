"""The org statement PDF: every cluster and every team of the lake's month, on A4.

Why its own page and not the fleet statement with a cluster column: finance reconciles the
org statement against each cluster's own fleet statement, so it lists clusters first (each
cluster's fleet cost as its manifest published it), then every cluster x team line (never
folded, as the fleet statement never folds teams), then a reconciliation block: the clusters'
fleet costs add up to the org total, and inside each cluster the team charges plus the special
lines add up to that cluster's fleet cost; last, the rules each cluster's bill was computed
under, and a warning when they differ (docs/decisions/0150). Same CSS, table and PDF machinery as the cluster
statements (`reports.html`, `reports.pdf`), so the two look and print alike.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from gpuledger.analytics.billing.money import to_cents
from gpuledger.analytics.billing.org_bill import OrgBill
from gpuledger.analytics.billing.special_lines import SPECIAL_LINES
from gpuledger.reports.html import CSS, _css_string, _table, hours, money
from gpuledger.reports.pdf import layout

PDF_NAME = "org-statement.pdf"


def cluster_rows(bill: OrgBill) -> list[dict[str, Any]]:
    """One row per cluster: its published fleet cost and its lines' hours (cluster order)."""
    out = []
    for name, fleet_cost in sorted(bill.clusters.items()):
        mine = [r for r in bill.lines.iter_rows(named=True) if r["cluster"] == name]
        out.append({
            "cluster": name, "cost": fleet_cost,
            "teams": sum(1 for r in mine if r["team"] not in SPECIAL_LINES),
            "card_hours": sum(float(r["card_hours"]) for r in mine),
            "idle_cost": sum(float(r["idle_cost"]) for r in mine),
        })
    return out


def team_rows(bill: OrgBill) -> list[dict[str, Any]]:
    """Every cluster x team line of a bill by (cluster, team): teams by cost, special lines last."""
    rows = list(bill.lines.select("cluster", "team", "card_hours", "idle_cost", "cost").iter_rows(named=True))
    return sorted(rows, key=lambda r: (r["cluster"], r["team"] in SPECIAL_LINES, -float(r["cost"]),
                                       r["team"]))


def reconciliation(bill: OrgBill) -> list[str]:
    """Lines of text: per cluster, teams + special lines = its fleet cost; then clusters = org."""
    out = []
    for name, fleet_cost in sorted(bill.clusters.items()):
        mine = [r for r in bill.lines.iter_rows(named=True) if r["cluster"] == name]
        teams = sum(to_cents(float(r["cost"])) for r in mine if r["team"] not in SPECIAL_LINES)
        special = {s: sum(to_cents(float(r["cost"])) for r in mine if r["team"] == s) for s in SPECIAL_LINES}
        terms = " + ".join([f"team charges {teams / 100:,.2f}",
                            *(f"{s} {c / 100:,.2f}" for s, c in special.items())])
        out.append(f"{name}: {terms} = fleet cost {fleet_cost:,.2f}")
    parts = " + ".join(f"{n} {v:,.2f}" for n, v in sorted(bill.clusters.items()))
    out.append(f"Org: {parts} = org total {bill.fleet_cost:,.2f}")
    return out


def render_org_statement(bill: OrgBill, issuer: str) -> str:
    """The complete HTML document of the org statement. No generation time: the same lake
    gives the same bytes, so a rewrite keeps the manifest (the newest watermark says how
    fresh the data is)."""
    footer = f"{issuer} · org statement · {bill.period}"
    clusters = cluster_rows(bill)
    cluster_table = _table(
        [("cluster", "Cluster", False), ("teams", "Teams", True), ("h", "GPU-hours", True),
         ("idle", "Idle cost", True), ("cost", "Fleet cost", True)],
        [{**r, "h": hours(r["card_hours"]), "idle": money(r["idle_cost"]), "cost": money(r["cost"])}
         for r in clusters],
        {"cluster": "Org total", "teams": "", "h": hours(sum(r["card_hours"] for r in clusters)),
         "idle": money(sum(r["idle_cost"] for r in clusters)), "cost": money(bill.fleet_cost)},
    )
    lines = team_rows(bill)
    line_table = _table(
        [("cluster", "Cluster", False), ("team", "Team / line", False), ("h", "GPU-hours", True),
         ("idle", "Idle cost", True), ("cost", "Cost", True)],
        [{"cluster": r["cluster"], "team": r["team"], "h": hours(float(r["card_hours"])),
          "idle": money(float(r["idle_cost"])), "cost": money(float(r["cost"]))} for r in lines],
        {"cluster": "Org total", "team": "", "h": hours(sum(float(r["card_hours"]) for r in lines)),
         "idle": money(sum(float(r["idle_cost"]) for r in lines)), "cost": money(bill.fleet_cost)},
    )
    recon = "<br>".join(escape(t) for t in reconciliation(bill))
    note = bill.rules_note()
    rules = "<br>".join(escape(t) for t in bill.rules_lines())
    warning = f'<p class="reconcile" id="rules-differ"><b>{escape(note)}</b></p>' if note else ""
    body = (
        f"<header><div><h1>Org GPU cost statement</h1>"
        f'<div class="meta">{escape(bill.period)} · {len(bill.clusters)} clusters · amounts in '
        f"{escape(bill.currency)} · issued by {escape(issuer)} · engine {escape(bill.engine)}</div></div>"
        f'<div class="right"><div class="meta">{escape(_as_of(bill))}</div></div></header>'
        f"<section><h2>Cost by cluster</h2>{cluster_table}</section>"
        f"<section><h2>Cost by cluster and team</h2>{line_table}</section>"
        f'<section id="reconciliation"><h2>Reconciliation</h2><p class="reconcile">{recon}</p></section>'
        f'<section id="rules"><h2>Computed under</h2>{warning}<p class="reconcile">{rules}</p></section>'
        '<div class="notes">Each cluster priced its own month; the org statement only adds the '
        "published lines up (never re-prices). Per cluster FOCUS rows are in the org FOCUS file.</div>"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Org statement · {escape(bill.period)}</title>"
        f"<style>:root {{ --footer: {_css_string(footer)}; }}{CSS}</style></head>"
        f'<body><div class="page">{body}</div></body></html>'
    )


def _as_of(bill: OrgBill) -> str:
    marks = sorted(str(w) for w in bill.watermarks.values() if w)
    return f"data as of {marks[-1]}" if marks else "data as of: no watermark"


def write_org_pdf(bill: OrgBill, folder: Path, issuer: str) -> Path:
    """Lay out and write `folder/org-statement.pdf` (as many pages as the lines need)."""
    path = folder / PDF_NAME
    layout(render_org_statement(bill, issuer), path).write_pdf(path)
    return path
