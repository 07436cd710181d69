"""`gpuledger demo`: the main job on the embedded default — no config, no cluster needed.

Simulates a GPU fleet for a month, loads it into a fresh warehouse, bills it, finds idle
time, proposes MIG and quota plans, writes the month's reports and (unless `--no-serve`)
opens the dashboard.
"""

from __future__ import annotations

import argparse

from gpuledger.command_context import Context
from gpuledger.commands import AddCommand


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.commands._demo_pipeline import DemoOptions, run_demo

    options = DemoOptions(
        gpus=args.gpus, period=args.period, seed=args.seed, out_dir=args.out,
        serve=not args.no_serve, host=args.host, port=args.port,
        warehouse=args.warehouse,
    )
    return run_demo(options, ctx)


def register(add_command: AddCommand) -> None:
    p = add_command("demo", "simulate a fleet for a month, bill it, plan, report, and show it", _run)
    p.add_argument("--gpus", type=int, default=256, help="fleet size (default 256)")
    p.add_argument(
        "--period", default=None,
        help="month to simulate, YYYY-MM (default: the last complete calendar month)",
    )
    p.add_argument("--seed", type=int, default=7, help="simulator seed (default 7)")
    p.add_argument("--out", default="gpuledger-demo", help="folder for the warehouse and reports")
    p.add_argument("--no-serve", action="store_true", help="end after the reports; no dashboard")
    p.add_argument("--host", default="127.0.0.1", help="dashboard address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="dashboard port (default 8050)")
