"""`gpuledger idle`: the workloads that held GPUs without using them, by idle cost.

One row per workload by default (a Deployment's replicas and a multi-GPU pod's cards summed,
`analytics.workloads.idle.idle_workloads`); `--by pod`, `--by label:<key>` or `--by allocation` (one row
per pod and GPU, the former output) or `--by priority_class` (one row per team, namespace
and PriorityClass: the workloads' idle summed by class) regroup; `--team` / `--namespace` filter.
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
from gpuledger.commands._scope import scope_options, workload_option

if TYPE_CHECKING:
    from gpuledger.analytics.billing.bill import Bill

_ALLOCATION = ("team", "namespace", "pod", "idle_cost", "idle_card_hours", "idle_fraction", "card_hours",
               "model", "sharing_mode", "profile", "held_idle")
_WORKLOAD = ("team", "namespace", "workload", "idle_cost", "idle_card_hours", "idle_fraction", "card_hours",
             "workload_kind", "pods", "gpus", "model")
"""Most read first: a narrow terminal leaves out the last columns (`commands._output`)."""


@click.command("idle", help="the workloads that held GPUs idle, by idle cost")
@window_options
@click.option("--top", type=int, default=20, show_default=True, help="how many rows")
@workload_option(extra="priority_class")
@scope_options
@output_option()
@price_options
@as_computed_option
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.billing.priority_class import DIMENSION, class_workloads
    from gpuledger.analytics.exports import idle_json
    from gpuledger.analytics.workloads.idle import held_allocations, idle_allocations, idle_workloads
    from gpuledger.analytics.workloads.requested import check_workload_by, filter_scope, pod_workloads
    from gpuledger.terminal_progress import busy

    window, by = window_from_args(args), args.by
    check_workload_by(by, also=("pod", "allocation", DIMENSION))
    with busy(f"finding idle workloads {window}"), ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), strict_prices=args.strict_prices,
                            as_computed=args.as_computed)
        if by == "allocation":
            frame = filter_scope(idle_allocations(bill), args.team, args.namespace)
        else:
            owners = (None if by == "pod" else class_workloads(wh) if by == DIMENSION
                      else pod_workloads(wh, by))
            frame = idle_workloads(held_allocations(bill), owners, team=args.team, namespace=args.namespace)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    frame = frame.head(args.top)
    document = idle_json(frame, window, by)
    if by == "allocation":
        document["allocations"] = document.pop("workloads")
    emit(ctx, args.format, rows=frame.to_dicts(), columns=_ALLOCATION if by == "allocation" else _WORKLOAD,
         money=("idle_cost",), json_text=json.dumps(document, indent=2),
         csv_text=frame_csv(frame, ("idle_cost",), ctx.settings.currency),
         title=f"Top {args.top} idle {'allocations' if by == 'allocation' else 'workloads'} {window}  "
               f"({idle_rule(bill)})")
    return 0


def idle_rule(bill: Bill) -> str:
    """What "idle" meant for these numbers: the bill's rules (the stored ones `--as-computed`),
    never today's settings beside numbers computed under others."""
    if bill.rules is None:
        return "idle: rules not recorded (part of the roll-up predates them)"
    s = bill.rules.sampling
    how = ", as computed" if bill.as_computed else ""
    return f"idle: activity < {s.idle_threshold:g} for >= {s.idle_min_us / 60e6:g} min{how}"
