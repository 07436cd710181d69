"""`gpuledger recommend`: right-sizing and reclaim recommendations with monthly savings."""

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

_SHOWN = ("kind", "team", "namespace", "pod", "current", "recommended", "workload_profile",
          "monthly_saving", "reason")


@click.command("recommend", help="right-sizing and idle-reclaim recommendations with savings")
@window_options
@click.option("--top", type=int, default=25, show_default=True, help="how many recommendations")
@click.option("--headroom", type=float, default=0.2, show_default=True,
              help="extra memory and compute kept above the observed peak / p95")
@click.option("--seed", type=int, default=7, show_default=True,
              help="clustering seed (profiles are stable for a seed)")
@output_option()
@price_options
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.bill import compute_bill
    from gpuledger.analytics.recommend import recommend
    from gpuledger.terminal_progress import busy

    window = window_from_args(args)
    with busy(f"profiling workloads {window}"), ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), strict_prices=args.strict_prices)
        result = recommend(wh, window, ctx.settings, bill=bill, headroom=args.headroom, seed=args.seed)
        empty = coverage_warning(wh, window)
    warn([*bill_warnings(bill), *([empty] if empty else [])])
    recs = result.recommendations.head(args.top)
    total = float(result.recommendations["monthly_saving"].sum())
    document = {
        "start": window.start.isoformat(), "end": window.end.isoformat(),
        "currency": ctx.settings.currency, "monthly_saving": round(total, 2),
        "profiles": result.profiles.to_dicts(), "recommendations": recs.to_dicts(),
    }
    title = "\n".join([f"Workload profiles {window}", *(
        f"  [{row['profile_id']}] {row['explanation']}" for row in result.profiles.iter_rows(named=True)),
        f"\n{result.recommendations.height} recommendations, estimated saving "
        f"{total:,.2f} {ctx.settings.currency}/month (top {args.top} shown)"])
    emit(ctx, args.format, rows=recs.to_dicts(), columns=_SHOWN, money=("monthly_saving",),
         json_text=json.dumps(document, indent=2, default=str), csv_text=recs.write_csv(), title=title)
    return 0
