"""`gpuledger rollup`: roll a period up again under the current rules.

Every rolled-up hour remembers the rules it was computed under (docs/decisions/0147). After a
rule changes (an idle threshold, the MIG share basis, …) a bill of older hours is computed from
raw samples under the new rules while they last, and refused once they are gone; this command
stores the roll-up of those hours under the current rules, from raw samples, so bills read it
again. Only days holding hours rolled up under other rules are rolled (whole UTC days, the
collector's windows); watermarks do not move; running it twice changes nothing the second
time. Hours whose raw samples were compacted away are refused in one line.
"""

from __future__ import annotations

import argparse
import json

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs, window_options
from gpuledger.commands._analytics_common import window_from_args
from gpuledger.commands._output import emit

SCHEMA = "gpuledger.rollup/v1"


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.billing.bill import period_text
    from gpuledger.analytics.usage.plan import span_text, stored_rules_of
    from gpuledger.collect_rollup import reroll
    from gpuledger.core.rules import Rules
    from gpuledger.terminal_progress import busy

    window = window_from_args(args)
    rules = Rules.of(ctx.settings)
    period = period_text(window)
    with busy(f"rolling up {period}"), ctx.open_warehouse(read_only=False) as wh:
        done = reroll(wh, rules, window, what=f"rollup {period}")
        before = stored_rules_of(wh, [r.fingerprint for r in done.runs])
    current = f"rules {rules.rollup_fingerprint} ({rules.describe_rollup()})"
    rows = [{
        "start": r.start.isoformat().replace("+00:00", "Z"), "end": r.end.isoformat().replace("+00:00", "Z"),
        "hours": int((r.end - r.start).total_seconds() // 3600),
        "from_rules": r.fingerprint,
        "from": before[r.fingerprint].describe_rollup() if r.fingerprint in before else "not recorded",
    } for r in done.runs]
    document = {"schema": SCHEMA, "period": period, "rules": rules.rollup_fingerprint,
                "description": rules.describe_rollup(), "rerolled": rows,
                "days": len(done.days), "rows": done.rows}
    hours = sum(int((r.end - r.start).total_seconds() // 3600) for r in done.runs)
    if not rows:
        summary = f"rollup {period}: every rolled-up hour is already under the current {current}"
    else:
        days = span_text(done.days[0].start, done.days[-1].end)
        summary = (f"rollup {period}: {hours} hours rolled up again under the "
                   f"current {current} ({len(done.days)} days, {days}, {done.rows:,} rows)")
    if not rows and args.format in ("table", "wide"):
        ctx.echo(summary)
        return 0
    emit(ctx, args.format, rows=rows, document=document, json_text=json.dumps(document, indent=2),
         columns=("start", "end", "hours", "from_rules", "from"), footer=[summary])
    return 0


@click.command("rollup", help="roll a period up again under the current rules (hours stored under others)")
@window_options
@output_option()
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
