"""`gpuledger recommend`: right-sizing and reclaim recommendations with monthly savings."""

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

_SHOWN = ("kind", "team", "namespace", "pod", "current", "recommended", "workload_profile",
          "monthly_saving", "reason")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.bill import compute_bill
    from gpuledger.analytics.recommend import recommend

    window = window_from_args(args)
    with ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), strict_prices=args.strict_prices)
        result = recommend(wh, window, ctx.settings, bill=bill, headroom=args.headroom, seed=args.seed)
    warn(bill_warnings(bill))
    recs = result.recommendations.head(args.top)
    if args.format == "json":
        ctx.echo(json.dumps({
            "start": window.start.isoformat(), "end": window.end.isoformat(),
            "currency": ctx.settings.currency,
            "monthly_saving": round(float(result.recommendations["monthly_saving"].sum()), 2),
            "profiles": result.profiles.to_dicts(),
            "recommendations": recs.to_dicts(),
        }, indent=2, default=str))
    elif args.format == "csv":
        ctx.echo(recs.write_csv().rstrip("\n"))
    else:
        ctx.echo(f"Workload profiles {window}")
        for row in result.profiles.iter_rows(named=True):
            ctx.echo(f"  [{row['profile_id']}] {row['explanation']}")
        total = float(result.recommendations["monthly_saving"].sum())
        ctx.echo(f"\n{result.recommendations.height} recommendations, estimated saving "
                 f"{total:,.2f} {ctx.settings.currency}/month (top {args.top} shown)")
        ctx.echo(text_table(recs.to_dicts(), _SHOWN, ("monthly_saving",)))
    return 0


def register(add_command: AddCommand) -> None:
    p = add_command("recommend", "right-sizing and idle-reclaim recommendations with savings", _run)
    add_window_args(p)
    p.add_argument("--top", type=int, default=25, help="how many recommendations (default 25)")
    p.add_argument("--headroom", type=float, default=0.2,
                   help="extra memory and compute kept above the observed peak / p95 (default 0.2)")
    p.add_argument("--seed", type=int, default=7, help="clustering seed (profiles are stable for a seed)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    add_price_args(p)
