"""`gpuledger recommend`: right-sizing and reclaim recommendations with monthly savings.

At most one recommendation per workload and kind (`analytics.workloads.recommend.per_workload`: a
Deployment's replicas and a multi-GPU pod's cards summed), with the saving per team;
`--by label:<key>` groups workloads by a label instead of their owner; `--team` /
`--namespace` filter.
"""

from __future__ import annotations

import argparse
import json

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
from gpuledger.commands._output import all_columns, emit, write_csv
from gpuledger.commands._recommend_advice import ADVICE_KINDS, run_kinds, top_of
from gpuledger.commands._scope import scope_options

_SHOWN = ("team", "namespace", "workload", "monthly_saving", "kind", "recommended", "current", "gpus",
          "workload_kind", "workload_profile", "reason")
"""Most read first: a narrow terminal leaves out the last columns (`commands._output`)."""


@click.command("recommend", help="right-sizing and idle-reclaim recommendations with savings")
@window_options
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="how many rows to show, largest saving first (with --kind: of the advice); "
                   "default 25, every row with --all")
@click.option("--headroom", type=float, default=0.2, show_default=True,
              help="extra memory and compute kept above the observed peak / p95")
@click.option("--seed", type=int, default=7, show_default=True,
              help="clustering seed (profiles are stable for a seed)")
@click.option("--kind", multiple=True, type=click.Choice(ADVICE_KINDS),
              help="fleet advice instead (repeatable): see the Advice section of docs/guide/analytics.md")
@click.option("--by", "by", default="owner", show_default=True,
              help="what one workload is: owner (Deployment, StatefulSet, Job, notebook) or label:<key>")
@click.option("--all", "all", is_flag=True,
              help="list every row, also those saving less than advice.min_monthly_saving a month "
                   "(and no --top cut unless --top is given)")
@scope_options
@output_option()
@price_options
@as_computed_option
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    if args.kind:
        return run_kinds(args, ctx)
    import polars as pl

    from gpuledger.analytics.advice.actionable import floor_of, quiet_lines, split
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.exports import recommendations_json, rows_json, savings_by_team
    from gpuledger.analytics.workloads.recommend import recommend
    from gpuledger.analytics.workloads.requested import check_workload_by, filter_scope, workload_usage
    from gpuledger.terminal_progress import busy
    from gpuledger.warehouse.day_parts import kept_day_parts

    window = window_from_args(args)
    check_workload_by(args.by)
    with busy(f"profiling workloads {window}"), ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), strict_prices=args.strict_prices,
                            as_computed=args.as_computed)
        with kept_day_parts(wh.path) as days:  # the allocations' statistics a refresh kept (0261)
            usage = workload_usage(wh, window, ctx.settings, bill, days=days)
        result = recommend(wh, window, ctx.settings, bill=bill, headroom=args.headroom, seed=args.seed,
                           by=args.by, usage=usage)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    every = filter_scope(result.recommendations, args.team, args.namespace)
    floor = floor_of(ctx.settings, every=args.all)
    shown = split(every.to_dicts(), floor)  # ranked (`actionable.rank_key`), the rows under the floor counted
    recs = shown.rows[: top_of(args)]
    document = recommendations_json(every, window, ctx.settings.currency, result.profiles)
    document["recommendations"] = rows_json(pl.DataFrame(recs, schema=every.schema))  # the table's, in order
    document["min_monthly_saving"] = floor
    document["below_floor"] = [q.as_dict() for q in shown.quiet]
    total, cur = float(every["monthly_saving"].sum()), ctx.settings.currency
    title = "\n".join([f"Workload profiles {window}", *(
        f"  [{row['profile_id']}] {row['explanation']}" for row in result.profiles.iter_rows(named=True)),
        f"\n{every.height:,} recommendations (one per workload and kind), estimated saving "
        f"{cur} {total:,.2f}/month; {len(shown.rows):,} save {cur} {floor:,.2f}/month or more "
        f"(top {len(recs)} shown, largest first)"])
    footer = [f"Not listed (`--all` lists them): {line}" for line in quiet_lines(shown.quiet, cur)]
    if every.height:
        footer.append("Saving per team and month: " + ", ".join(
            f"{team} {saving:,.2f}" for team, saving in savings_by_team(every).items()))
    emit(ctx, args.format, rows=recs, columns=_SHOWN, money=("monthly_saving",),
         json_text=json.dumps(document, indent=2, default=str),
         csv_text=write_csv(recs, all_columns(recs, ()), money=("monthly_saving",), currency=cur),
         title=title, footer=footer)
    return 0
