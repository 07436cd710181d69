"""`gpuledger export --out DIR`: hive-partitioned Parquet of the warehouse."""

from __future__ import annotations

import argparse
from pathlib import Path

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.window import Window, parse_instant
    from gpuledger.warehouse.export import export_parquet

    window = None
    if args.start or args.end:
        if not (args.start and args.end):
            from gpuledger.core.errors import InputError

            raise InputError("export: give both --start and --end, or neither")
        window = Window(parse_instant(args.start), parse_instant(args.end))
    with ctx.open_warehouse(read_only=True) as wh:
        stats = export_parquet(wh, Path(args.out), window)
    for table, rows in sorted(stats.tables.items()):
        ctx.echo(f"{table:20s} {rows:>12,d} rows")
    ctx.echo(f"exported to {stats.out_dir} (hive-partitioned by year/month)")
    return 0


@click.command("export", help="write the warehouse as hive-partitioned Parquet")
@click.option("--out", required=True, help="output folder")
@click.option("--start", help="only time-series rows from this instant (ISO-8601)")
@click.option("--end", help="only time-series rows before this instant (ISO-8601)")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
