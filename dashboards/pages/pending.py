"""The team page's Pending panel: the team's waiting workloads, why each waits, and what fits now.

Why a module of its own: the team page belongs to its own view (`pages.team`); this panel reads
a different source (the stored pending statuses and the capacity now, `dashboards.capacity_data`,
the same document as `gpuledger why` and `/api/v1/why`), so it is appended by one hook in
`team.show` after the page's own access check, and a failure here never takes the page down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from dash import html

from gpuledger.core.errors import GpuledgerError
from gpuledger.dashboards.pages.common import PageContext, number, section, table

COLUMNS = (("name", "workload"), ("kind", "kind"), ("queue", "queue"), ("shape", "shape"),
           ("reason", "why it waits"), ("waited_hours", "waited (h)"),
           ("usual_wait_hours", "usually (h)"), ("detail", "detail"), ("suggestion", "fits now"))


def render(rows: Sequence[Mapping[str, Any]], by_queue: Sequence[Mapping[str, Any]]) -> html.Section:
    """The panel from a `why` document's rows already cut to one team."""
    hours = sum(float(q["gpu_hours_waiting"]) for q in by_queue)
    servable = sum(int(q["servable_elsewhere"]) for q in by_queue)
    headline = html.P(
        f"{len(rows)} waiting · {number(hours)} GPU-hours requested but waiting · "
        f"{servable} could run now elsewhere (another shape, queue, pool or layout)",
        id="pending-line")
    frame = pl.DataFrame([{k: r.get(k) for k, _ in COLUMNS} for r in rows],
                         schema={k: pl.String if k not in ("waited_hours", "usual_wait_hours")
                                 else pl.Float64 for k, _ in COLUMNS})
    fmt = {"waited_hours": number, "usual_wait_hours": lambda x: "—" if x is None else number(x)}
    return section("Pending: why it waits", headline,
                   table(frame, COLUMNS, id="team-pending-table", formats=fmt),
                   html.P(html.A("What each reason means and how to fix it", href="#",
                                 title="docs/guide/pending.md"), className="hint"),
                   id="team-pending")


def panel(ctx: PageContext, team: str) -> html.Section:
    """The team's rows of the served `why` document (an unreadable source: one line)."""
    from gpuledger.analytics.waiting.fleet import why_document
    from gpuledger.core.config import utcnow
    from gpuledger.dashboards.capacity_data import served_fleet

    try:
        doc = why_document(served_fleet(ctx.data, ctx.settings), utcnow(),
                           basis=ctx.settings.sharing.mig_share_basis)
    except GpuledgerError as exc:
        return section("Pending: why it waits", html.P(f"not available: {exc}", className="empty"),
                       id="team-pending")
    return render([r for r in doc["waiting"] if r["team"] == team],
                  [q for q in doc["by_queue"] if q["team"] == team])


def append_panel(ctx: PageContext, page: html.Div, team: str) -> html.Div:
    """`page` with the panel before its last child (the bill download link)."""
    children = list(page.children or [])
    page.children = [*children[:-1], panel(ctx, team), *children[-1:]]
    return page
