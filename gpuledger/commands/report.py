"""`gpuledger report …`: monthly reports (CSV, FOCUS, PDF statements), verify, scheduled run.

- `report monthly --period YYYY-MM|last --out DIR [--finalize] [--reissue --reason TEXT]
  [--allow-partial]`: a month below `reports.min_coverage` is finalized only with
  `--allow-partial`
- `report verify --period YYYY-MM --out DIR`: issued files against manifests, signatures and
  the warehouse, both ways (a folder the warehouse never recorded is a problem too)
- `report due --out DIR`: finalize every completed month not yet issued (idempotent; what
  the CronJob runs)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gpuledger.command_context import Context
from gpuledger.commands import AddCommand
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

    period = resolve_period(args.period)
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
            allow_partial=args.allow_partial,
        )
    totals = result.totals
    if args.json:
        ctx.echo(json.dumps(_as_json(result), indent=2, sort_keys=True))
        return 0
    label = "draft" if result.version is None else f"final v{result.version}"
    ctx.echo(f"report {result.period} ({label}): {result.folder}")
    ctx.echo(
        f"  fleet cost {totals['fleet_cost']:,.2f} {totals['currency']} · "
        f"{len(totals['teams'])} team statements · {totals['summary_rows']} summary lines · "
        f"{totals['focus_rows']} FOCUS rows"
    )
    if totals["adjustments_cost"]:
        ctx.echo(f"  late-data adjustments {totals['adjustments_cost']:+,.2f} {totals['currency']}")
    for note in result.notes:
        ctx.echo(f"  note: {note}")
    return 0


def _as_json(result: Any) -> dict[str, Any]:
    return {
        "period": result.period, "folder": str(result.folder), "status": result.status,
        "version": result.version, "manifest_sha256": result.manifest_sha256,
        "totals": result.totals, "notes": result.notes,
    }


def _verify(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.reports.manifest import signing_key
    from gpuledger.reports.recovery import verify_issues

    period = resolve_period(args.period)
    out = _out_dir(args, ctx)
    with ctx.open_warehouse(read_only=True) as wh:
        problems = verify_issues(wh, out, period, key=signing_key(ctx.settings))
    if problems:
        for problem in problems:
            ctx.echo(f"FAIL {problem}")
        raise ReportError(f"period {period}: {len(problems)} problem(s) with the issued report under {out}")
    ctx.echo(f"period {period}: every issued version under {out} matches its manifest and the warehouse")
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


def _no_verb(args: argparse.Namespace, ctx: Context) -> int:
    args.report_parser.print_help()
    return 2


def register(add_command: AddCommand) -> None:
    parser = add_command("report", "monthly bills: CSV, FinOps FOCUS, PDF statements", _no_verb)
    parser.set_defaults(report_parser=parser)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    from gpuledger.commands import global_options

    inherited = [global_options(suppress=True)]  # `report monthly --warehouse X` works too

    monthly = verbs.add_parser(
        "monthly", help="write one month's report", description="write one month's report",
        parents=inherited,
    )
    monthly.set_defaults(handler=_monthly)
    monthly.add_argument("--period", required=True, help="YYYY-MM (UTC month) or 'last'")
    monthly.add_argument("--out", help="output folder (default: reports.out_dir)")
    monthly.add_argument("--finalize", action="store_true", help="issue v1 (locks the period)")
    monthly.add_argument(
        "--reissue", action="store_true", help="issue the next version of a finalized period"
    )
    monthly.add_argument("--reason", help="why the period is reissued (required with --reissue)")
    monthly.add_argument(
        "--allow-partial", action="store_true",
        help="finalize even below reports.min_coverage of hours with samples",
    )
    monthly.add_argument("--json", action="store_true", help="print the result as JSON")

    verify = verbs.add_parser(
        "verify", help="check issued files against manifests and the warehouse",
        description="check issued files against manifests and the warehouse", parents=inherited,
    )
    verify.set_defaults(handler=_verify)
    verify.add_argument("--period", required=True, help="YYYY-MM or 'last'")
    verify.add_argument("--out", help="output folder (default: reports.out_dir)")

    due = verbs.add_parser(
        "due", help="finalize every completed month not yet issued (idempotent)",
        description="finalize every completed month not yet issued (idempotent)", parents=inherited,
    )
    due.set_defaults(handler=_due)
    due.add_argument("--out", help="output folder (default: reports.out_dir)")
    due.add_argument(
        "--backfill", type=int, metavar="N",
        help="consider the last N completed months (default: reports.schedule_backfill_months)",
    )
