"""`gpuledger idle`: the allocations that held cards without using them, by idle cost."""

from __future__ import annotations

import argparse
import json

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, price_options, runs, window_options
from gpuledger.commands._analytics_common import (
    bill_warnings,
    coverage_warning,
    warn,
    window_from_args,
)
from gpuledger.commands._output import emit

_SHOWN = ("team", "namespace", "pod", "model", "sharing_mode", "profile", "card_hours",
          "idle_card_hours", "idle_fraction", "held_idle", "idle_cost")


@click.command("idle", help="the allocations that held GPUs idle, by idle cost")
@window_options
@click.option("--top", type=int, default=20, show_default=True, help="how many allocations")
@output_option()
@price_options
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.bill import compute_bill
    from gpuledger.analytics.idle import top_idle
    from gpuledger.terminal_progress import busy

    window = window_from_args(args)
    with busy(f"finding idle allocations {window}"), ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), strict_prices=args.strict_prices)
        frame = top_idle(wh, window, ctx.settings, bill=bill, top=args.top)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    rows = [
        {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
        for row in frame.to_dicts()
    ]
    document = {"start": window.start.isoformat(), "end": window.end.isoformat(), "allocations": rows}
    emit(ctx, args.format, rows=frame.to_dicts(), columns=_SHOWN, money=("idle_cost",),
         json_text=json.dumps(document, indent=2), csv_text=frame.write_csv(),
         title=f"Top {args.top} idle allocations {window}  (idle: activity < "
               f"{ctx.settings.idle.threshold} for >= {ctx.settings.idle.min_minutes} min)")
    return 0
