"""`gpuledger idle`: the allocations that held cards without using them, by idle cost."""

from __future__ import annotations

import argparse
import json

from gpuledger.command_context import Context
from gpuledger.commands import AddCommand
from gpuledger.commands._analytics_common import (
    add_price_args,
    add_window_args,
    bill_warnings,
    text_table,
    warn,
    window_from_args,
)

_SHOWN = ("team", "namespace", "pod", "model", "sharing_mode", "profile", "card_hours",
          "idle_card_hours", "idle_fraction", "held_idle", "idle_cost")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.bill import compute_bill
    from gpuledger.analytics.idle import top_idle

    window = window_from_args(args)
    with ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), strict_prices=args.strict_prices)
        frame = top_idle(wh, window, ctx.settings, bill=bill, top=args.top)
    warn(bill_warnings(bill))
    if args.format == "json":
        rows = [
            {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
            for row in frame.to_dicts()
        ]
        ctx.echo(json.dumps({"start": window.start.isoformat(), "end": window.end.isoformat(),
                             "allocations": rows}, indent=2))
    elif args.format == "csv":
        ctx.echo(frame.write_csv().rstrip("\n"))
    else:
        ctx.echo(f"Top {args.top} idle allocations {window}  (idle: activity < "
                 f"{ctx.settings.idle.threshold} for >= {ctx.settings.idle.min_minutes} min)")
        ctx.echo(text_table(frame.to_dicts(), _SHOWN, ("idle_cost",)))
    return 0


def register(add_command: AddCommand) -> None:
    p = add_command("idle", "the allocations that held GPUs idle, by idle cost", _run)
    add_window_args(p)
    p.add_argument("--top", type=int, default=20, help="how many allocations (default 20)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    add_price_args(p)
