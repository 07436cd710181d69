"""`gpuledger recommend --kind ...`: the fleet-shaping advice kinds (`analytics.advice.run`).

Kept out of `recommend.py` so the per-workload recommendations and the fleet advice stay two
small handlers: `--kind` selects one or more advice kinds (repeatable); each prints its rows
in the shared output layer, and `-o json` gives each kind's full evidence document.
"""

from __future__ import annotations

import argparse
import json

from gpuledger.analytics.advice import KINDS
from gpuledger.analytics.advice.actionable import floor_of, quiet_lines, split, unpriced_lines
from gpuledger.command_context import Context
from gpuledger.commands._analytics_common import bill_warnings, coverage_warning, warn, window_from_args
from gpuledger.commands._output import emit

ADVICE_KINDS = KINDS.names()
"""The `--kind` choices: the registered advice kinds (declared lazily, so naming them imports
no polars at start-up)."""
DEFAULT_TOP = 25
"""Rows `recommend` shows without `--top` or `--all`: a screenful, the largest savings first."""


def top_of(args: argparse.Namespace) -> int | None:
    """How many ranked rows `recommend` shows: `--top` when given, else every row under `--all`
    (it asks for the whole list) and the first `DEFAULT_TOP` otherwise."""
    return args.top if args.top is not None else None if args.all else DEFAULT_TOP


COLUMNS = ("kind", "scope", "monthly_saving", "recommended", "current", "reason")
"""Most read first: a narrow terminal leaves out the last columns (`commands._output`)."""


def run_kinds(args: argparse.Namespace, ctx: Context) -> int:
    """The kinds; the window is billed once here when a kind prices from the bill (`reads_bill`),
    under `--as-computed` when given, and its notes printed like `bill`'s."""
    from gpuledger.analytics.advice.run import reads_bill, run_advice
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.terminal_progress import busy
    from gpuledger.warehouse.day_parts import kept_day_parts

    window = window_from_args(args)
    kinds = tuple(args.kind)
    with busy(f"computing advice {window}"), ctx.open_warehouse(read_only=True) as wh:
        bill = (compute_bill(wh, window, ctx.settings, ("team",), as_computed=args.as_computed)
                if any(reads_bill(KINDS.get(kind)) for kind in kinds) else None)
        with kept_day_parts(wh.path) as days:  # the days unchanged since a refresh are not read again
            found = run_advice(wh, window, ctx.settings, kinds, bill=bill, days=days)
        empty = coverage_warning(wh, window)
    warn([*(bill_warnings(bill) if bill is not None else []), *([empty] if empty else [])])
    every = [row for advice in found for row in advice.rows]
    floor = floor_of(ctx.settings, every=args.all)
    shown = split(every, floor)
    total = shown.total  # the listed rows' saving (`actionable`: one rule, the page's too)
    rows = shown.rows[: top_of(args)]  # ranked (`actionable.rank_key`): the largest first
    cur = ctx.settings.currency
    document = {
        "start": window.start.isoformat(), "end": window.end.isoformat(),
        "currency": cur, "monthly_saving": round(total, 2), "min_monthly_saving": floor,
        **{a.kind: a.document for a in found},
        "recommendations": rows, "below_floor": [q.as_dict() for q in shown.quiet],
    }
    title = (f"Fleet advice {window}: {', '.join(a.kind for a in found)}\n{len(every):,} recommendations; "
             f"{len(shown.rows):,} worth acting on (saving {cur} {floor:,.2f}/month or more, "
             "a risk or not priced), "
             f"together {cur} {total:,.2f}/month (top {len(rows)} shown, largest first)")
    footer = [f"Not listed (`--all` lists them): {line}" for line in quiet_lines(shown.quiet, cur)]
    footer.extend(unpriced_lines(shown.rows))  # unknown, never 0 (decisions 0213, 0228); null in the JSON
    emit(ctx, args.format, rows=rows, columns=COLUMNS, money=("monthly_saving",),
         json_text=json.dumps(document, indent=2, default=str), title=title, footer=footer)
    return 0
