"""`gpuledger compact`: age raw GPU samples out once the hourly roll-up holds them.

Keeps the last `retention.raw_days` whole UTC days of raw samples (plus the sample pass's
margin before them) and removes older ones only where the roll-up covers them
(docs/decisions/0071); bills, reports and pages of old periods read the roll-up. Safe to run
at any time and again: one transaction, nothing removed twice.
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._output import emit


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.usage.rollup import compact_raw_samples
    from gpuledger.core.config import utcnow
    from gpuledger.core.config_retention import RetentionSettings

    settings = ctx.settings
    if args.raw_days is not None:
        retention = RetentionSettings(raw_days=args.raw_days)
        settings = settings.model_copy(update={"retention": retention})
    with ctx.open_warehouse(read_only=False) as wh:
        stats = compact_raw_samples(wh, settings, utcnow())
    row = {
        "removed_rows": stats.removed_rows,
        "removed_before": stats.removed_before.isoformat() if stats.removed_before else None,
        "kept_raw_rows": stats.kept_rows,
        "used_mib_before": round(stats.used_bytes_before / 2**20, 1),
        "used_mib_after": round(stats.used_bytes_after / 2**20, 1),
        "raw_days": settings.retention.raw_days,
        "reason": stats.reason,
    }
    emit(ctx, args.format, rows=[row], document=row, title="compaction")
    return 0


@click.command("compact", help="remove raw GPU samples older than retention.raw_days once rolled up")
@click.option("--raw-days", type=click.IntRange(1, 3650), default=None,
              help="keep this many days of raw samples (default: retention.raw_days, 35)")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
