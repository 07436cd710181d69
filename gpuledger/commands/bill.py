"""`gpuledger bill`: the chargeback bill of a month or any window, by team and more."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from gpuledger.analytics.bill import Bill

_SHOWN = ("card_hours", "idle_card_hours", "list_cost", "sharing_discount", "redistributed_cost",
          "cost", "idle_cost")
_MONEY = ("list_cost", "sharing_discount", "redistributed_cost", "cost", "idle_cost")


@click.command("bill", help="the chargeback bill: card-hours and cost per team (and more)")
@window_options
@click.option("--by", default="team", show_default=True,
              help="dimensions, comma-separated: team (always), namespace, pod, queue, node, "
                   "pool, model, sharing_mode, profile, uuid, day")
@output_option()
@click.option("--source", type=click.Choice(("auto", "raw", "rollup")), default="auto",
              show_default=True, help="card-hours from the hourly roll-up, raw samples, or both (auto)")
@price_options
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.bill import compute_bill
    from gpuledger.terminal_progress import busy

    window = window_from_args(args)
    by = [d for d in args.by.split(",") if d.strip()]
    with busy(f"billing {window}"), ctx.open_warehouse(read_only=True) as wh:
        # The command prints lines only: the lines grain gives the same lines, faster.
        bill = compute_bill(wh, window, ctx.settings, by, source=args.source, grain="lines",
                            strict_prices=args.strict_prices)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    flagged = ("unpriced_card_hours",) if bill.unpriced_models else ()
    footer = [f"Fleet: {bill.fleet_card_hours:,.3f} card-hours, {bill.fleet_cost:,.2f} {bill.currency}",
              f"Data as of {as_of(bill)}"]
    if bill.unattributed_namespaces:
        footer.append("Unattributed namespaces (add the team label): "
                      + ", ".join(bill.unattributed_namespaces))
    emit(ctx, args.format, rows=bill.lines.to_dicts(), columns=[*bill.by, *_SHOWN, *flagged],
         money=_MONEY, json_text=json.dumps(bill.to_dict(), indent=2),
         csv_text=bill.lines.write_csv(),
         title=f"Bill {bill.period}  ({bill.currency}, price book {bill.price_book_version}, "
               f"redistribution {bill.redistribution}, from {bill.source})",
         footer=footer)
    return 0


def as_of(bill: Bill) -> str:
    """The newest sample the bill saw, so a dead collector never looks like a quiet month."""
    if bill.newest_sample is None:
        return "-: no samples before the end of the window"
    return bill.newest_sample.isoformat().replace("+00:00", "Z") + " (newest sample)"
