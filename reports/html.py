"""Statement pages as self-contained HTML (inline CSS and SVG), printable on A4 (one page per
team statement; the fleet statement lists every team and may take more).

The same markup is the HTML statement and the input WeasyPrint turns into the PDF, so the two
never disagree. Every value is escaped; nothing is fetched from the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from gpuledger.analytics.billing.special_lines import IDLE_UNDEFINED, SpecialLine
from gpuledger.reports.billing import SPECIAL_LINES
from gpuledger.reports.chart import daily_cost_svg
from gpuledger.reports.statement import Limits, Statement, capped

CSS = """
@page { size: A4; margin: 13mm 12mm 14mm 12mm;
  @bottom-left { content: var(--footer); font: 7.5pt 'DejaVu Sans', sans-serif; color: #777; }
  @bottom-right { content: "page " counter(page) " of " counter(pages);
    font: 7.5pt 'DejaVu Sans', sans-serif; color: #777; } }
html { font: 8.3pt/1.3 'DejaVu Sans', Helvetica, Arial, sans-serif; color: #1d2733; }
body { margin: 0; }
.page { max-width: 186mm; margin: 0 auto; }
header { display: flex; justify-content: space-between; align-items: flex-start;
  border-bottom: 2px solid #1d2733; padding-bottom: 5px; margin-bottom: 8px; }
h1 { font-size: 15pt; margin: 0 0 2px 0; }
h2 { font-size: 10pt; margin: 9px 0 4px 0; border-bottom: 1px solid #c8cdd3; padding-bottom: 2px; }
.meta { color: #555; font-size: 7.8pt; }
.badge { display: inline-block; padding: 3px 8px; border-radius: 3px; font-weight: bold;
  font-size: 8.5pt; color: #fff; background: #2f7d32; }
.badge.draft { background: #b26a00; }
.right { text-align: right; }
.tiles { display: flex; flex-wrap: wrap; gap: 6px; }
.tile { flex: 1 1 28%; min-width: 0; border: 1px solid #d5dae0; border-radius: 4px; padding: 5px 7px;
  background: #f7f9fb; }
.tile .label { color: #555; font-size: 7.4pt; text-transform: uppercase; letter-spacing: 0.03em; }
.tile .value { font-size: 11pt; font-weight: bold; white-space: nowrap; }
.tile.main { background: #eaf2fb; border-color: #9cc0e6; }
table { width: 100%; border-collapse: collapse; }
th { text-align: left; font-weight: bold; color: #444; border-bottom: 1px solid #9aa3ad;
  padding: 2px 4px; font-size: 7.8pt; }
td { padding: 2px 4px; border-bottom: 1px solid #e6e9ed; }
td.nowrap { white-space: nowrap; }
table.fixed { table-layout: fixed; }
table.fixed td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
table.fixed tr.total td { overflow: visible; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.total td { font-weight: bold; border-top: 1px solid #9aa3ad; border-bottom: none; }
.empty { color: #777; font-style: italic; }
.notes { color: #555; font-size: 7.4pt; margin-top: 8px; }
.chart { margin-top: 2px; }
.reconcile { margin: 4px 0 0 0; font-size: 7.8pt; }
"""


def money(value: float) -> str:
    return f"{value:,.2f}"


def hours(value: float) -> str:
    return f"{value:,.1f}"


def _cls(kind: bool | str) -> str:
    return "num" if kind is True else (kind or "")


def _table(
    columns: Sequence[tuple[str, str, bool | str]], rows: Sequence[dict[str, Any]],
    total: dict[str, Any] | None = None, empty: str = "none this period",
    widths: Sequence[int] | None = None,
) -> str:
    """columns: (key, heading, True for numeric or a CSS class); values are pre-formatted.
    `widths` (percent per column) fixes the layout, so long cells are cut, never wrapped."""
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    cols = ""
    if widths:
        cols = "<colgroup>" + "".join(f'<col style="width:{w}%">' for w in widths) + "</colgroup>"
    head = "".join(
        f'<th class="{_cls(kind)}">{escape(title)}</th>' for _, title, kind in columns
    )
    body = []
    for row, cls in [*((r, "") for r in rows), *(((total, "total"),) if total else ())]:
        cells = "".join(
            f'<td class="{_cls(kind)}">{escape(str(row.get(key, "")))}</td>'
            for key, _, kind in columns
        )
        body.append(f'<tr class="{cls}">{cells}</tr>')
    fixed = ' class="fixed"' if widths else ""
    return f"<table{fixed}>{cols}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _tiles(st: Statement) -> str:
    t = st.totals
    idle_share = t["idle_card_hours"] / t["card_hours"] * 100 if t["card_hours"] else 0.0
    tiles = [
        ("main", "Amount due" if st.team else "Fleet cost", money(t["total_due"])),
        ("", "List cost", money(t["list_cost"])),
        ("", "Sharing discount", money(t["sharing_discount"])),
        ("", "GPU-hours", hours(t["card_hours"])),
        ("", "Idle GPU-hours", f"{hours(t['idle_card_hours'])} · {idle_share:.0f}%"),
        ("", "Idle cost", money(t["idle_cost"])),
    ]
    if t.get("adjustments"):
        tiles.insert(1, ("", "Late-data adjustments", money(t["adjustments"])))
    if t.get("lost_gpu_hours"):  # a part of the GPU-hours above (analytics.billing.preemption)
        lost = f"{hours(t['lost_gpu_hours'])} · {money(t['lost_cost'])}"
        tiles.append(("", "GPU-hours lost to preemption", lost))
    if st.budget:
        used = t["total_due"] / st.budget * 100
        tiles.insert(1, ("", "Budget vs actual", f"{used:.0f}% of {money(st.budget)}"))
    return '<div class="tiles">' + "".join(
        f'<div class="tile {cls}"><div class="label">{escape(label)}</div>'
        f'<div class="value">{escape(value)}</div></div>'
        for cls, label, value in tiles
    ) + "</div>"


def clip(text: str, width: int) -> str:
    """Shorten long pod names in the middle, keeping the distinctive tail."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def _model_table(st: Statement, limits: Limits) -> str:
    rows = [
        {"model": r["model"] or "", "mode": r["sharing_mode"] or "", "h": hours(r["card_hours"]),
         "rate": rate(r["list_cost"], r["card_hours"]),
         "list": money(r["list_cost"]), "disc": money(r["sharing_discount"]),
         "idle": money(r["idle_cost"]), "cost": money(r["cost"])}
        for r in capped(st.by_model, ("model", "sharing_mode"), limits.table_rows)
    ]
    total = {
        "model": "Total", "h": hours(sum(r["card_hours"] for r in st.by_model)),
        "list": money(sum(r["list_cost"] for r in st.by_model)),
        "disc": money(sum(r["sharing_discount"] for r in st.by_model)),
        "idle": money(sum(r["idle_cost"] for r in st.by_model)),
        "cost": money(sum(r["cost"] for r in st.by_model)),
    }
    return _table(
        [("model", "GPU model", False), ("mode", "Sharing", False), ("h", "GPU-hours", True),
         ("rate", "Rate / GPU-hour", True), ("list", "List cost", True), ("disc", "Discount", True),
         ("idle", "of which idle", True),
         ("cost", "Cost", True)],
        rows, total if len(rows) > 1 else None, "no GPU usage this period",
    )


def _team_table(st: Statement) -> str:
    """Every team (never folded: the fleet statement is what finance reconciles), then the
    special lines; a team's budget and its use beside its cost."""
    special = [r for r in st.by_team if r["team"] in SPECIAL_LINES]
    teams = [r for r in st.by_team if r["team"] not in SPECIAL_LINES]
    rows = [
        {"team": r["team"], "h": hours(r["card_hours"]), "list": money(r["list_cost"]),
         "cost": money(r["cost"]), "budget": _budget_use(r["cost"], st.budgets.get(str(r["team"])))}
        | ({"ih": "–", "idle": "–"} if r["team"] in IDLE_UNDEFINED
           else {"ih": hours(r["idle_card_hours"]), "idle": money(r["idle_cost"])})
        for r in [*teams, *special] if r["team"] != SpecialLine.SHARING_DISCOUNT
    ]
    rows += [_funding_row(r) for r in special if r["team"] == SpecialLine.SHARING_DISCOUNT]
    total = {"team": "Fleet total", "h": hours(sum(r["card_hours"] for r in st.by_team)),
             "ih": hours(sum(r["idle_card_hours"] for r in st.by_team)),
             "list": money(sum(r["list_cost"] for r in st.by_team)),
             "idle": money(sum(r["idle_cost"] for r in st.by_team)),
             "cost": money(sum(r["cost"] for r in st.by_team))}
    return _table(
        [("team", "Team / line", False), ("h", "GPU-hours", True), ("ih", "Idle GPU-hours", True),
         ("list", "List cost", True), ("idle", "Idle cost", True), ("cost", "Cost", True),
         ("budget", "Budget (used)", True)],
        rows, total,
    )


FUNDING_LABEL = "Sharing discounts granted to teams (funded by the platform)"
"""How the `sharing_discount` line reads on a statement: a funding line, not a charge (issue 32:
"+$19,347 with 0 GPU-hours" read as a charge). Its amount stays in the Cost column, because
the teams' discounted charges plus this funding are the fleet cost (the reconciliation)."""


def _funding_row(r: dict[str, Any]) -> dict[str, Any]:
    """The sharing discount as the platform's funding of the teams' discounts: no GPU-hours of
    its own ("–", not 0), its amount marked as funding."""
    return {"team": FUNDING_LABEL, "h": "–", "ih": "–", "list": "–", "idle": "–",
            "cost": f"{money(r['cost'])} funding", "budget": ""}


def _budget_use(cost: float, budget: float | None) -> str:
    return f"{money(budget)} ({cost / budget * 100:.0f}%)" if budget else ""


def rate(amount: float, gpu_hours: float) -> str:
    """The unit price behind an amount: amount / GPU-hours (rate x GPU-hours = amount)."""
    return f"{amount / gpu_hours:,.4f}" if gpu_hours else ""


def _reconciliation(st: Statement) -> str:
    """Team charges + absorbed discount + unallocated + unattributed = fleet cost, on one line
    (a table of five rows would push a small fleet's statement onto a second page)."""
    *parts, (label, total) = st.reconciliation
    terms = " + ".join(f"{escape(name)} <b>{money(value)}</b>" for name, value in parts)
    check = round(sum(v for _, v in parts), 2)
    mark = "" if abs(check - total) < 0.005 else f" (the parts sum to {money(check)})"
    return f'<p class="reconcile">{terms} = {escape(label)} <b>{money(total)}</b>{escape(mark)}</p>'



def _idle_table(st: Statement, limits: Limits) -> str:
    rows = [
        {"holder": clip(r.holder, 36 if st.team else 30), "team": r.team, "device": r.device,
         "ih": hours(r.idle_card_hours), "frac": f"{r.idle_fraction * 100:.0f}%",
         "ic": money(r.idle_cost)}
        for r in st.idle[: limits.idle_rows]
    ]
    cols: list[tuple[str, str, bool | str]] = [
        ("holder", "Workload", "nowrap"), ("device", "Device", "nowrap"),
            ("ih", "Idle GPU-hours", True), ("frac", "Idle share", True), ("ic", "Idle cost", True)]
    widths = [38, 26, 14, 10, 12]
    if st.team is None:
        cols.insert(1, ("team", "Team", "nowrap"))
        widths = [32, 9, 24, 13, 10, 12]
    return _table(cols, rows, empty="no allocation sat idle this period", widths=widths)


def _recommendation_table(st: Statement, limits: Limits) -> str:
    wide = st.team is not None  # the fleet statement spends a column on the team
    rows = [
        {"action": clip(r.action, 60), "workload": clip(r.workload, 27 if wide else 23),
         "team": r.team or "", "detail": clip(r.detail, 80),
         "save": money(r.monthly_savings)}
        for r in st.recommendations[: limits.recommendations]
    ]
    label = "Possible savings" if len(st.recommendations) == len(rows) else (
        f"All {len(st.recommendations)} recommendations")
    total = {"action": label, "save": money(sum(r.monthly_savings for r in st.recommendations))}
    cols: list[tuple[str, str, bool | str]] = [
        ("action", "Recommendation", "nowrap"), ("workload", "Workload", "nowrap"),
        ("detail", "Why", False), ("save", "Saves/month", True)]
    widths = [30, 28, 29, 13]
    if st.team is None:
        cols.insert(2, ("team", "Team", "nowrap"))
        widths = [27, 25, 9, 26, 13]
    return _table(cols, rows, total if len(rows) > 1 else None, "no recommendation this period", widths)


def _advice_section(st: Statement) -> str:
    """Fleet advice (`reports.fleet_advice`): no section at all when nothing is proposed."""
    if not st.advice:
        return ""
    rows = [{"kind": a.kind, "subject": a.subject, "proposal": a.proposal,
             "save": "not priced" if a.monthly_saving is None else money(a.monthly_saving)}
            for a in st.advice]
    table = _table([("kind", "Kind", "nowrap"), ("subject", "Subject", False),
                    ("proposal", "Proposal", False), ("save", "Saves/month", True)], rows)
    return ('<section id="fleet-advice"><h2>Fleet advice</h2>' + table + '<p class="notes">Top '
            "rows per kind; every row and its evidence: gpuledger recommend --kind KIND.</p></section>")


def _adjustment_table(st: Statement, limits: Limits) -> str:
    rows = [
        {"month": r["for_period"], "team": r["team"], "h": f"{r['card_hours']:+,.1f}",
         "cost": f"{r['cost']:+,.2f}"}
        for r in capped(st.adjustments, ("for_period", "team"), limits.table_rows)
    ]
    return _table(
        [("month", "Issued month", False), ("team", "Team / line", False),
         ("h", "GPU-hours", True), ("cost", "Cost", True)], rows,
    )


def _css_string(text: str) -> str:
    """A CSS string literal (quotes, backslashes and markup-breaking characters escaped)."""
    return '"' + "".join(c if c.isalnum() or c in " .-_·:/()" else f"\\{ord(c):x} " for c in text) + '"'


def data_as_of(st: Statement) -> str:
    """The statement's "data as of": its newest sample, so a month billed while collection
    was down says how far its data goes (the generation time alone would not)."""
    if st.newest_sample is None:
        return "data as of: no samples"
    return f"data as of {st.newest_sample:%Y-%m-%d %H:%M} UTC"


def render_statement(st: Statement, limits: Limits | None = None) -> str:
    """The complete HTML document of one statement, its tables capped by `limits`."""
    limits = limits or Limits()
    span = f"{st.window_start:%Y-%m-%d} to {st.window_end:%Y-%m-%d} (UTC, end exclusive)"
    draft = "draft" if st.status.startswith("DRAFT") else ""
    footer = f"{st.issuer} · {st.title} · {st.period} · {st.status}"
    sections = [
        "<header><div>",
        f"<h1>{escape(st.title)}</h1>",
        f'<div class="meta">GPU cost statement for {escape(st.period)}: {escape(span)}<br>'
        f"Statement {escape(st.number)} · billing account {escape(st.billing_account)}"
        + (f" · cost centre {escape(st.cost_centre)}" if st.cost_centre else "")
        + f" · issued by {escape(st.issuer)} · amounts in {escape(st.currency)}</div>",
        f'</div><div class="right"><span class="badge {draft}">{escape(st.status)}</span>'
        f'<div class="meta">generated {st.generated_at:%Y-%m-%d %H:%M} UTC<br>'
        f"{escape(data_as_of(st))}<br>"
        f"price book {escape(st.price_book_version)}</div></div></header>",
        f"<section>{_tiles(st)}</section>",
        f'<section><h2>Daily cost</h2><div class="chart">{daily_cost_svg(st.days, st.currency)}'
        "</div></section>",
    ]
    if st.team is None:
        sections.append(f"<section><h2>Cost by team</h2>{_team_table(st)}</section>")
        if st.reconciliation:
            sections.append(f'<section id="reconciliation">{_reconciliation(st)}</section>')
    sections += [
        f"<section><h2>Cost by GPU model and sharing mode</h2>{_model_table(st, limits)}</section>",
        f"<section><h2>Top idle workloads</h2>{_idle_table(st, limits)}</section>",
        f"<section><h2>Recommendations</h2>{_recommendation_table(st, limits)}</section>",
        _advice_section(st),
    ]
    if st.adjustments:
        sections.append(
            "<section><h2>Adjustments for issued months (late data)</h2>"
            f"{_adjustment_table(st, limits)}</section>"
        )
    notes = [
        "GPU-hours: hours held x the share of the GPU held (a 3g MIG slice is 3/7 of a GPU).",
        "Rate x GPU-hours = list cost; the sharing discount then applies.",
        "Idle: held while the GPU engine was busy under the idle threshold; it is part of the cost.",
        "Savings are estimated per month (730 h) if the recommendation is applied.",
        *st.notes,
    ]
    if st.computed_under:
        sections.append(f'<div class="notes" id="computed-under">{escape(st.computed_under)}</div>')
    sections.append('<div class="notes">' + "<br>".join(escape(n) for n in notes) + "</div>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(st.title)} · {escape(st.period)}</title>"
        f"<style>:root {{ --footer: {_css_string(footer)}; }}{CSS}</style></head>"
        f'<body><div class="page">{"".join(sections)}</div></body></html>'
    )
