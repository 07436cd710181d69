"""`gpuledger bill`: the chargeback bill of a month or any window, by team and more.

`--by owner` (or `label:<key>`) gives one line per workload; `--team` / `--namespace` keep
only those lines; the CSV carries `period` and `currency` columns.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, price_options, runs, window_options
from gpuledger.commands._analytics_common import (
    as_computed_option,
    bill_warnings,
    coverage_warning,
    warn,
    window_from_args,
)
from gpuledger.commands._output import emit, frame_csv
from gpuledger.commands._scope import scope_options
from gpuledger.core.errors import InputError

if TYPE_CHECKING:
    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.core.window import Window
    from gpuledger.warehouse import Warehouse

_SHOWN = ("card_hours", "cost", "idle_card_hours", "idle_cost", "list_cost", "sharing_discount",
          "redistributed_cost")
"""Most read first: a narrow terminal leaves out the last columns (`commands._output`)."""
_MONEY = ("list_cost", "sharing_discount", "redistributed_cost", "cost", "idle_cost")


@click.command("bill", help="the chargeback bill: GPU-hours and cost per team (and more)")
@window_options
@click.option("--by", default="team", show_default=True,
              help="dimensions, comma-separated: team (always), namespace, pod, queue, node, "
                   "pool, model, sharing_mode, profile, uuid, day, claim, device_class; owner "
                   "(Deployment, StatefulSet, Job, notebook) or label:<key> for one line per workload")
@scope_options
@output_option()
@click.option("--source", type=click.Choice(("auto", "raw", "rollup")), default="auto",
              show_default=True, help="GPU-hours from the hourly roll-up, raw samples, or both (auto)")
@price_options
@as_computed_option
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    import polars as pl

    from gpuledger.terminal_progress import busy

    window = window_from_args(args)
    by = [d.strip() for d in args.by.split(",") if d.strip()]
    with busy(f"billing {window}"), ctx.open_warehouse(read_only=True) as wh:
        # The command prints lines only: the lines grain gives the same lines, faster.
        bill = scoped_bill(wh, window, ctx, by, args)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    flagged = ("unpriced_card_hours",) if bill.unpriced_models else ()
    footer = [f"Fleet: {bill.fleet_card_hours:,.3f} GPU-hours, {bill.fleet_cost:,.2f} {bill.currency}",
              f"Data as of {as_of(bill)}", rules_line(bill)]
    if bill.unattributed_namespaces:
        footer.append("Unattributed namespaces (add the team label): "
                      + ", ".join(bill.unattributed_namespaces))
    csv = bill.lines.with_columns(pl.lit(bill.period).alias("period"),
                                  pl.lit(bill.currency).alias("currency"))
    emit(ctx, args.format, rows=bill.lines.to_dicts(), columns=[*bill.by, *_SHOWN, *flagged],
         money=_MONEY, json_text=json.dumps(bill.to_dict(), indent=2),
         csv_text=frame_csv(csv, _MONEY, bill.currency),
         title=f"Bill {bill.period}  ({bill.currency}, price book {bill.price_book_version}, "
               f"redistribution {bill.redistribution}, from {bill.source})",
         footer=footer)
    return 0


def scoped_bill(wh: Warehouse, window: Window, ctx: Context, by: list[str], args: argparse.Namespace) -> Bill:
    """The bill by `by`; `owner` / `label:<key>` regroup pod lines per workload
    (`analytics.workloads.requested.lines_by_workload`), `--team` / `--namespace` keep only those lines
    (the fleet totals stay the fleet's)."""
    from dataclasses import replace

    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.workloads.requested import (
        check_workload_by,
        filter_scope,
        lines_by_workload,
        pod_workloads,
        regroup_lines,
    )

    grouping = [d for d in by if d == "owner" or d.startswith("label:")]
    for d in grouping:
        check_workload_by(d)
    if len(grouping) > 1:
        raise InputError("bill --by: name at most one of owner / label:<key>")
    plain = [d for d in by if d not in grouping]
    wanted = list(dict.fromkeys(["team", *plain]))
    extra = ["namespace", "pod"] if grouping else (["namespace"] if args.namespace else [])
    compute_by = list(dict.fromkeys([*wanted, *extra]))
    bill = compute_bill(wh, window, ctx.settings, compute_by, source=args.source, grain="lines",
                        strict_prices=args.strict_prices, as_computed=args.as_computed)
    lines = filter_scope(bill.lines, args.team, args.namespace)
    if grouping:
        lines = lines_by_workload(lines, pod_workloads(wh, grouping[0]), wanted)
        return replace(bill, lines=lines, by=(*wanted, "workload_kind", "workload"))
    if compute_by != wanted:
        lines = regroup_lines(lines, wanted)
    return replace(bill, lines=lines, by=tuple(wanted))


def rules_line(bill: Bill) -> str:
    """The rules the numbers were computed under, for people (the JSON has each value)."""
    if bill.rules is None:
        return "Rules: not recorded (part of the roll-up predates them; MIG share basis unknown)"
    how = " (as computed)" if bill.as_computed else ""
    return f"Rules {bill.rules.rollup_fingerprint}{how}: {bill.rules.describe()}"


def as_of(bill: Bill) -> str:
    """The newest sample the bill saw, so a dead collector never looks like a quiet month."""
    if bill.newest_sample is None:
        return "-: no samples before the end of the window"
    return bill.newest_sample.isoformat().replace("+00:00", "Z") + " (newest sample)"
