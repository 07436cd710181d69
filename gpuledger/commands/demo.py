"""`gpuledger demo`: the main job on the embedded default — no config, no cluster needed.

Simulates a GPU fleet for a month, loads it into a fresh warehouse, bills it, finds idle
time, proposes MIG and quota plans, writes the month's reports and (unless `--no-serve`)
opens the dashboard.
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.commands._demo_pipeline import DemoOptions, run_demo

    options = DemoOptions(
        gpus=args.gpus, period=args.period, seed=args.seed, out_dir=args.out,
        serve=not args.no_serve, host=args.host, port=args.port,
        warehouse=args.warehouse,
    )
    return run_demo(options, ctx)


@click.command("demo", help="simulate a fleet for a month, bill it, plan, report, and show it")
@click.option("--gpus", type=int, default=256, help="fleet size (default 256)")
@click.option("--period", default=None, metavar="YYYY-MM|last",
              help="month to simulate (default: the last complete calendar month)")
@click.option("--seed", type=int, default=7, help="simulator seed (default 7)")
@click.option("--out", default="gpuledger-demo", help="folder for the warehouse and reports")
@click.option("--no-serve", is_flag=True, help="end after the reports; no dashboard")
@click.option("--host", default="127.0.0.1", help="dashboard address (default 127.0.0.1)")
@click.option("--port", type=int, default=8050, help="dashboard port (default 8050)")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
