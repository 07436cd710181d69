"""The Plans page's "Measured by" part of a quota plan: the model's backtest and the twin's
measurement side by side, each labelled by what measured it (rows and labels from
`optimizer.plan.render_twin`, the same as `plans show`)."""

from __future__ import annotations

from typing import Any

import polars as pl
from dash import html

from gpuledger.dashboards.pages.common import table
from gpuledger.optimizer.plan.render_twin import SIDE_BY_SIDE_COLUMNS, UNITS, SideBySide


def twin_frame(view: SideBySide) -> pl.DataFrame:
    """The side-by-side rows as a frame of text cells (empty when the twin has not measured)."""
    return pl.DataFrame(list(view.rows), schema={k: pl.String for k, _ in SIDE_BY_SIDE_COLUMNS})


def twin_section(view: SideBySide | None) -> list[Any]:
    """The heading, one line per label (what measured each column) and, once the twin has
    measured the plan, the table; nothing for a plan the twin does not judge (None)."""
    if view is None:
        return []
    labels = html.Ul([html.Li(label) for label in view.labels], id="plan-measured-by")
    parts: list[Any] = [html.H4("Measured by"), labels]
    if view.rows:
        parts.extend([html.P(UNITS, className="muted"),
                      table(twin_frame(view), list(SIDE_BY_SIDE_COLUMNS), id="plan-twin-table")])
        if view.left_out:
            parts.append(html.P(view.left_out, className="muted"))
    return parts
