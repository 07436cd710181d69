"""Large dashboard tables as a real data grid (AG Grid through dash-ag-grid): filter, sort,
paginate and export, instead of hand-written HTML tables and a sort script (issue 32).

Why a library: a table of hundreds of advice rows or workloads needs per-column filters, sorting
on the unrounded number, paging and a CSV of what the user filtered; AG Grid does each of
these, kept by its maintainers. Cells keep the numbers (sorting and filters work on them) and
format money in the browser with d3-format, which dash-ag-grid ships (`d3.format`), at the
currency's decimals (`core.money.decimals`).

The export button is a pattern-matched clientside callback registered once for every grid
(`dash.clientside_callback`, picked up by the app at start) that calls the grid's own
`exportDataAsCsv` (the rows as filtered and sorted), so a page only places `grid(...)`. The
wrapping `Div` carries the caller's `id` (what tests and links address); the grid inside it is
`<id>-grid` (`dash_ag_grid.getApi("<id>-grid")` in the browser).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import dash
import dash_ag_grid as dag  # at import, not in a callback: Dash refuses a component library loaded late
import polars as pl
from dash import MATCH, Input, Output, State, html

from gpuledger.core.money import decimals
from gpuledger.dashboards.pages.common import CURRENCY_SIGNS, money

PAGE_SIZE = 25
MIN_WIDTH = 110
"""A column's least width in px (the grid fills the rest of the page's width)."""
DIGIT_PX, CELL_PADDING_PX = 7.7, 36
"""The Alpine theme's figure width at its 14 px font, and a cell's padding on both sides: a money
column is at least as wide as its widest figure (0243: numbers are never cut)."""

dash.clientside_callback(
    """function(n, name) {
        if (n) { dash_ag_grid.getApi(name + "-grid").exportDataAsCsv(); }
        return window.dash_clientside.no_update;
    }""",
    Output({"type": "gl-grid-export", "name": MATCH}, "title"),
    Input({"type": "gl-grid-export", "name": MATCH}, "n_clicks"),
    State({"type": "gl-grid-export", "name": MATCH}, "value"),
    prevent_initial_call=True,
)


def money_formatter(currency: str, unknown: str = "–", *, unknown_js: str | None = None) -> dict[str, str]:
    """A grid formatter of money at the currency's decimals; `unknown` where a cell has none
    (or `unknown_js`, a JavaScript expression, e.g. one that reads the row)."""
    places = decimals(currency)
    sign = CURRENCY_SIGNS.get(currency, "")
    suffix = "" if sign else f" {currency}"
    return {"function": f"params.value == null ? {unknown_js or json.dumps(unknown)} : "
                        f"(params.value < 0 ? '-' : '') + '{sign}' + "
                        f"d3.format(',.{places}f')(Math.abs(params.value)) + '{suffix}'"}


def grid(frame: pl.DataFrame, columns: Sequence[tuple[str, str]], *, id: str,
         money_columns: Sequence[str] = (), currency: str = "USD", file_name: str | None = None,
         page_size: int = PAGE_SIZE, unknown: str = "–",
         column_options: Mapping[str, Mapping[str, Any]] | None = None, carry: Sequence[str] = (),
         grid_options: Mapping[str, Any] | None = None, highest_first: bool = False) -> html.Div:
    """`frame`'s `columns` ((key, header) pairs) in a grid: every column sortable and
    filterable, numbers right-aligned, money formatted (`unknown` where a cell has none),
    pages of `page_size`, a CSV button. `column_options` adds to (or overrides) a column's
    definition (a formatter, a renderer, cell classes), `carry` names fields the rows carry
    without a column (a link, a flag a class rule reads), `grid_options` adds grid options;
    `highest_first`: a header's first click sorts descending (a ranking of money)."""
    numeric = {c for c, dtype in frame.schema.items() if dtype.is_numeric()}
    defs: list[dict[str, Any]] = []
    for key, header in columns:
        col: dict[str, Any] = {"field": key, "headerName": header, "tooltipField": key}
        if key in numeric:
            col |= {"filter": "agNumberColumnFilter", "type": "rightAligned"}
            if key in money_columns:
                col["valueFormatter"] = money_formatter(currency, unknown)
                col["minWidth"] = _money_width(frame[key], currency)
        else:  # text wraps at its words, the row growing to hold it, rather than end in "…"
            col |= {"filter": "agTextColumnFilter", "wrapText": True, "autoHeight": True}
        defs.append(col | dict((column_options or {}).get(key, {})))
    keys = [k for k, _ in columns] + [k for k in carry if k not in dict(columns)]
    return html.Div([
        dag.AgGrid(
            id=f"{id}-grid", rowData=frame.select(keys).to_dicts(), columnDefs=defs,
            # headers wrap at their words rather than end in "…" (as the CLI's, 0197)
            defaultColDef={"sortable": True, "resizable": True, "floatingFilter": True, "minWidth": MIN_WIDTH,
                           "wrapHeaderText": True, "autoHeaderHeight": True,
                           **({"sortingOrder": ["desc", "asc", None]} if highest_first else {})},
            columnSize="responsiveSizeToFit",
            dashGridOptions={"pagination": True, "paginationPageSize": page_size,
                             # the page-size picker offers the size shown (AG Grid's default list
                             # lacks 25, and the picker then showed an empty box)
                             "paginationPageSizeSelector": sorted({page_size, 25, 50, 100}),
                             "domLayout": "autoHeight",
                             "tooltipShowDelay": 300, "enableCellTextSelection": True,
                             **(grid_options or {})},
            csvExportParams={"fileName": file_name or f"{id}.csv"}, className="ag-theme-alpine",
            style={"width": "100%"},
        ),
        html.Button("Export CSV", id={"type": "gl-grid-export", "name": id}, value=id, className="button",
                    title="download the rows as filtered and sorted (CSV)"),
    ], id=id, className="grid", **_data({"data-rows": str(frame.height)}))


def _money_width(values: pl.Series, currency: str) -> int:
    """The least width (px) that shows the column's widest amount whole (its largest or its most
    negative, as the grid formats them)."""
    known = values.drop_nulls()
    if known.is_empty():
        return MIN_WIDTH
    widest = max(len(money(float(v), currency)) for v in (known.max(), known.min()))  # type: ignore[arg-type]
    return max(MIN_WIDTH, math.ceil(widest * DIGIT_PX + CELL_PADDING_PX))


def _data(values: dict[str, str]) -> dict[str, Any]:
    """`data-*` attributes for a Dash component (typed loosely: Dash's stubs do not know them)."""
    return values
