"""`gpuledger refresh-serving`: compute the dashboard's month results and publish them.

Why (docs/decisions/0140): the recommendations, token costs and advice kinds the pages show read
a whole month of raw samples (0121); at 1,000 GPUs that is minutes and GBs. A writer's close
(`collect`, `compact`, the dashboard's own approvals) publishes only the serving store's tables;
this step, run after `collect` (the Helm chart's CronJob runs it next), computes the results
whose basis changed and publishes them. It opens the warehouse read-only, so it never holds the
writer lock: while it reads, a writer is refused as by any reader (and refused it is one line).
Publishers are kept apart by the serving store's own publish lock. Nothing to do (no dashboard
serves this warehouse yet) is a line, not an error; `--force` publishes one anyway.
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._output import emit


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.errors import WarehouseError
    from gpuledger.dashboards import serving_results
    from gpuledger.warehouse.serving_store import is_served, record_published

    path = ctx.warehouse_path
    if not path.exists():
        raise WarehouseError(f"no warehouse at {path}")
    if not (args.force or is_served(path)):
        ctx.echo(f"{path}: no dashboard serves this warehouse; nothing published (--force to publish)")
        return 0
    with ctx.open_warehouse(read_only=True) as wh:
        stats = serving_results.refresh_serving(wh, ctx.settings)
        record_published(path)  # the stamp of what was read: no writer can change it meanwhile
    row = {"serving_store": str(stats.path), "seconds": stats.seconds,
           "results_computed": len(serving_results.LAST_TIMINGS),
           "days_rewritten": stats.rewritten_parts, "tables_copied": stats.tables_copied,
           "raw_rows": stats.raw_rows,
           "mib": round(stats.bytes / 2**20, 1)}
    emit(ctx, args.format, rows=[row], document={**row, "results_s": dict(serving_results.LAST_TIMINGS)},
         title="serving store")
    return 0


@click.command("refresh-serving",
               help="compute the dashboard's month results (recommendations, advice) and publish them")
@click.option("--force", is_flag=True, help="publish even when no dashboard serves this warehouse yet")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
