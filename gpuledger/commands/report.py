"""`gpuledger report …`: monthly reports (CSV, FOCUS, PDF statements), verify, scheduled run.

- `report monthly [--period YYYY-MM|last] --out DIR [--finalize] [--reissue --reason TEXT]
  [--allow-partial] [--as-computed]`: a month below `reports.min_coverage` is finalized only with
  `--allow-partial`; `--as-computed` bills the month (and the issued months it adjusts) as the
  roll-up was computed, which the statements and the manifest say; the bill's notes go to
  stderr and into the manifest (`bill_notes`)
- `report monthly --lake URI [--period] [--out DIR]`: the org statement (PDF and CSVs) and org
  FOCUS file from the org lake instead of this cluster's warehouse: the same code as
  `gpuledger org report` (`commands.org.write_org_report`); the warehouse is never opened
- `report verify [--period YYYY-MM|last] --out DIR`: issued files against manifests, signatures and
  the warehouse, both ways (a folder the warehouse never recorded is a problem too), then the
  numbers: the month billed again now against what was billed for it (docs/decisions/0185); a
  version issued under other rules than today's settings is a note, never a problem (0150)
- `report due --out DIR`: finalize every completed month not yet issued (idempotent; what
  the CronJob runs)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import VerbGroup, output_option, runs
from gpuledger.commands._analytics_common import as_computed_option, warn
from gpuledger.commands._output import emit
from gpuledger.core.config import utcnow
from gpuledger.core.errors import InputError, ReportError
from gpuledger.core.period import Period


def resolve_period(text: str) -> str:
    """`YYYY-MM`, or `last` for the month before the current UTC month (`core.period`)."""
    return str(Period.parse(text, now=utcnow()))


def _out_dir(args: argparse.Namespace, ctx: Context) -> Path:
    return Path(args.out) if args.out else Path(ctx.settings.reports.out_dir)


def _monthly(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.reports.monthly import issue_monthly

    if args.lake_uri is not None:
        return _monthly_lake(args, ctx)
    period = resolve_period(args.period or "last")
    if args.reason is not None and not args.reissue:
        raise InputError("--reason goes with --reissue (it records why a period is issued again)")
    if args.reissue and not (args.reason or "").strip():
        raise InputError("--reissue needs --reason TEXT saying why the period is issued again")
    final = args.finalize or args.reissue
    out = _out_dir(args, ctx)
    with ctx.open_warehouse(read_only=not final) as wh:
        result = issue_monthly(
            wh, ctx.settings, period, out, finalize=args.finalize,
            reissue_reason=args.reason if args.reissue else None,
            allow_partial=args.allow_partial, as_computed=args.as_computed,
        )
    warn(result.bill_notes)
    totals = result.totals
    label = "draft" if result.version is None else f"final v{result.version}"
    lines = [
        f"report {result.period} ({label}): {result.folder}",
        f"  fleet cost {totals['fleet_cost']:,.2f} {totals['currency']} · "
        f"{len(totals['teams'])} team statements · {totals['summary_rows']} summary lines · "
        f"{totals['focus_rows']} FOCUS rows",
    ]
    if totals["adjustments_cost"]:
        lines.append(f"  late-data adjustments {totals['adjustments_cost']:+,.2f} {totals['currency']}")
    lines.append(f"  {result.computed_under}")
    lines.extend(f"  note: {note}" for note in result.notes)
    document = _as_json(result)
    row = {k: v for k, v in document.items() if not isinstance(v, dict | list)}
    row.update({k: v for k, v in totals.items() if not isinstance(v, dict | list)})
    emit(ctx, "json" if args.json else args.format, rows=[row],
         json_text=json.dumps(document, indent=2, sort_keys=True, default=str), text="\n".join(lines))
    return 0


def _monthly_lake(args: argparse.Namespace, ctx: Context) -> int:
    """`--lake`: the org statement; the cluster-only flags make no sense there and say so."""
    from gpuledger.commands.org import write_org_report

    for flag, value in (("--finalize", args.finalize), ("--reissue", args.reissue),
                        ("--allow-partial", args.allow_partial), ("--reason", args.reason),
                        ("--as-computed", args.as_computed)):
        if value:
            raise InputError(f"report monthly --lake: {flag} applies to a cluster's own report, "
                             "not the org statement")
    return write_org_report(args, ctx, _out_dir(args, ctx))


def _as_json(result: Any) -> dict[str, Any]:
    return {
        "period": result.period, "folder": str(result.folder), "status": result.status,
        "version": result.version, "manifest_sha256": result.manifest_sha256,
        "totals": result.totals, "notes": result.notes, "computed_under": result.computed_under,
        "bill_notes": result.bill_notes,
    }


def _verify(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.rules import Rules
    from gpuledger.reports.manifest import rules_notes, signing_key
    from gpuledger.reports.recovery import verify_issues

    period = resolve_period(args.period or "last")
    out = _out_dir(args, ctx)
    with ctx.open_warehouse(read_only=True) as wh:
        problems = verify_issues(wh, out, period, key=signing_key(ctx.settings), settings=ctx.settings)
    for note in rules_notes(out, period, Rules.of(ctx.settings)):
        ctx.echo(f"note: {note}")
    if problems:
        for problem in problems:
            ctx.echo(f"FAIL {problem}")
        raise ReportError(f"period {period}: {len(problems)} problem(s) with the issued report under {out}")
    ctx.echo(f"period {period}: every issued version under {out} matches its manifest and the warehouse, "
             "and the warehouse bills the month as issued")
    return 0


def _due(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.reports.schedule import run_due

    out = _out_dir(args, ctx)
    issued = run_due(ctx.settings, ctx.warehouse_path, out, utcnow(), backfill=args.backfill)
    for folder in issued:
        ctx.echo(f"issued {folder}")
    if not issued:
        ctx.echo(f"nothing due: every completed month is issued under {out} (or has no usage)")
    return 0


@click.group("report", cls=VerbGroup, invoke_without_command=True,
             help="monthly bills: CSV, FinOps FOCUS, PDF statements")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    click.echo(click.get_current_context().get_help())
    return 2


_PERIOD = click.option("--period", metavar="YYYY-MM|last",
                       help="UTC month (default: last, the last complete month)")
_OUT = click.option("--out", help="output folder (default: reports.out_dir)")


@command.command("monthly", help="write one month's report")
@_PERIOD
@_OUT
@click.option("--finalize", is_flag=True, help="issue v1 (locks the period)")
@click.option("--reissue", is_flag=True, help="issue the next version of a finalized period")
@click.option("--reason", help="why the period is reissued (required with --reissue)")
@click.option("--allow-partial", is_flag=True,
              help="finalize even below reports.min_coverage of hours with samples")
@click.option("--json", is_flag=True, help="print the result as JSON (same as -o json)")
@click.option("--lake", "lake_uri", metavar="URI",
              help="write the org statement and org FOCUS file from this lake (path or "
                   "s3://bucket/prefix) instead of this cluster's report")
@as_computed_option
@output_option()
@runs
def monthly_command(args: argparse.Namespace, ctx: Context) -> int:
    return _monthly(args, ctx)


@command.command("verify", help="check issued files against manifests and the warehouse")
@_PERIOD
@_OUT
@runs
def verify_command(args: argparse.Namespace, ctx: Context) -> int:
    return _verify(args, ctx)


@command.command("due", help="finalize every completed month not yet issued (idempotent)")
@_OUT
@click.option("--backfill", type=int, metavar="N",
              help="consider the last N completed months (default: reports.schedule_backfill_months)")
@runs
def due_command(args: argparse.Namespace, ctx: Context) -> int:
    return _due(args, ctx)
