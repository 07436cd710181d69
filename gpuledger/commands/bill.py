"""`gpuledger bill`: the chargeback bill of a month or any window, by team and more."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from gpuledger.command_context import Context
from gpuledger.commands import AddCommand
from gpuledger.commands._analytics_common import (
    add_price_args,
    add_window_args,
    bill_warnings,
    coverage_warning,
    text_table,
    warn,
    window_from_args,
)

if TYPE_CHECKING:
    from gpuledger.analytics.bill import Bill

_SHOWN = ("card_hours", "idle_card_hours", "list_cost", "sharing_discount", "redistributed_cost",
          "cost", "idle_cost")
_MONEY = ("list_cost", "sharing_discount", "redistributed_cost", "cost", "idle_cost")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.bill import compute_bill

    window = window_from_args(args)
    by = [d for d in args.by.split(",") if d.strip()]
    with ctx.open_warehouse(read_only=True) as wh:
        # The command prints lines only: the lines grain gives the same lines, faster.
        bill = compute_bill(wh, window, ctx.settings, by, source=args.source, grain="lines",
                            strict_prices=args.strict_prices)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    if args.format == "json":
        ctx.echo(json.dumps(bill.to_dict(), indent=2))
    elif args.format == "csv":
        ctx.echo(bill.lines.write_csv().rstrip("\n"))
    else:
        rows = bill.lines.to_dicts()
        ctx.echo(f"Bill {bill.period}  ({bill.currency}, price book {bill.price_book_version}, "
                 f"redistribution {bill.redistribution}, from {bill.source})")
        flagged = ("unpriced_card_hours",) if bill.unpriced_models else ()
        ctx.echo(text_table(rows, [*bill.by, *_SHOWN, *flagged], _MONEY))
        ctx.echo(f"Fleet: {bill.fleet_card_hours:,.3f} card-hours, {bill.fleet_cost:,.2f} {bill.currency}")
        ctx.echo(f"Data as of {as_of(bill)}")
        if bill.unattributed_namespaces:
            ctx.echo("Unattributed namespaces (add the team label): "
                     + ", ".join(bill.unattributed_namespaces))
    return 0


def as_of(bill: Bill) -> str:
    """The newest sample the bill saw, so a dead collector never looks like a quiet month."""
    if bill.newest_sample is None:
        return "-: no samples before the end of the window"
    return bill.newest_sample.isoformat().replace("+00:00", "Z") + " (newest sample)"


def register(add_command: AddCommand) -> None:
    p = add_command("bill", "the chargeback bill: card-hours and cost per team (and more)", _run)
    add_window_args(p)
    p.add_argument("--by", default="team",
                   help="dimensions, comma-separated: team (always), namespace, pod, queue, node, "
                        "pool, model, sharing_mode, profile, uuid, day")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--source", choices=("auto", "raw", "rollup"), default="auto",
                   help="card-hours from the hourly roll-up, raw samples, or both (auto)")
    add_price_args(p)
