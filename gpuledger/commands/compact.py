"""`gpuledger compact`: age raw GPU samples out once the hourly roll-up holds them.

Keeps the last `retention.raw_days` whole UTC days of raw samples (plus the sample pass's
margin before them) and removes older ones only where the roll-up covers them
(docs/decisions/0071); bills, reports and pages of old periods read the roll-up. Safe to run
at any time and again: one transaction, nothing removed twice.

Before it removes them it rolls up again, under the current rules, the hours about to lose their
raw samples whose roll-up was computed under other rules (or before rules were recorded): their
last chance to be computed under today's rules (docs/decisions/0147), said on stderr.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs
from gpuledger.commands._analytics_common import warn
from gpuledger.commands._output import emit

if TYPE_CHECKING:
    from gpuledger.collect_rollup import Rerolled
    from gpuledger.core.config import Settings
    from gpuledger.warehouse import Warehouse


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.usage.rollup import compact_raw_samples
    from gpuledger.core.config import utcnow
    from gpuledger.core.config_retention import RetentionSettings

    settings = ctx.settings
    if args.raw_days is not None:
        retention = RetentionSettings(raw_days=args.raw_days)
        settings = settings.model_copy(update={"retention": retention})
    now = utcnow()
    with ctx.open_warehouse(read_only=False) as wh:
        rerolled = _last_chance(wh, settings, now)
        stats = compact_raw_samples(wh, settings, now)
    hours = sum(int((r.end - r.start).total_seconds() // 3600) for r in rerolled.runs) if rerolled else 0
    if rerolled is not None and rerolled.runs:
        warn([f"compact: rolled up {hours} hours again under the current rules {rerolled.fingerprint} "
              f"before removing their raw samples (they were rolled up under other rules: "
              f"{', '.join(sorted({r.fingerprint or 'not recorded' for r in rerolled.runs}))})"])
    row = {
        "removed_rows": stats.removed_rows,
        "removed_before": stats.removed_before.isoformat() if stats.removed_before else None,
        "kept_raw_rows": stats.kept_rows,
        "used_mib_before": round(stats.used_bytes_before / 2**20, 1),
        "used_mib_after": round(stats.used_bytes_after / 2**20, 1),
        "raw_days": settings.retention.raw_days,
        "rerolled_hours": hours,
        "reason": stats.reason,
    }
    emit(ctx, args.format, rows=[row], document=row, title="compaction")
    return 0


def _last_chance(wh: Warehouse, settings: Settings, now: datetime) -> Rerolled | None:
    """Roll up again under the current rules the stale hours this compaction would take the raw
    samples of (those already without them stay as they are)."""
    from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
    from gpuledger.analytics.usage.rollup import compaction_bounds
    from gpuledger.collect_rollup import reroll
    from gpuledger.core.rules import Rules
    from gpuledger.core.window import Window
    from gpuledger.warehouse.retention import removable_until

    keep_from, margin = compaction_bounds(settings, now)
    start, end, _ = removable_until(wh, keep_from, margin, ROLLUP_SOURCE)
    if start is None or end is None:
        return None
    return reroll(wh, Rules.of(settings), Window(start, end), what="compact", strict=False)


@click.command("compact", help="remove raw GPU samples older than retention.raw_days once rolled up")
@click.option("--raw-days", type=click.IntRange(1, 3650), default=None,
              help="keep this many days of raw samples (default: retention.raw_days, 35)")
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
