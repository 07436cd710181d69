"""`gpuledger plans list|show`: the read-only verbs over stored plans (the optimizer's side).

`list` prints one line per plan (newest first, `--status` filters); `show ID` prints the plan as
a readable diff, or as JSON with `--format json` (mig-parted entries in NVIDIA's field names).
"""

from __future__ import annotations

import argparse
from typing import Any, get_args

from gpuledger.command_context import Context


def _list(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.optimizer.plan_render import list_json, render_list
    from gpuledger.optimizer.plan_store import list_plans

    with ctx.open_warehouse(read_only=True) as wh:
        records = list_plans(wh, args.status, kind=args.kind)
    ctx.echo(list_json(records) if args.format == "json" else render_list(records))
    return 0


def _show(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.optimizer.plan_render import plan_json, render_plan
    from gpuledger.optimizer.plan_store import load_record

    with ctx.open_warehouse(read_only=True) as wh:
        record = load_record(wh, args.plan_id)
    if args.format == "json":
        ctx.echo(plan_json(record))
    else:
        ctx.echo(render_plan(record.plan, record.status))
    return 0


def register_verbs(verbs: argparse._SubParsersAction[Any]) -> None:
    """Add `list` and `show` to the `plans` command."""
    from gpuledger.commands import global_options
    from gpuledger.optimizer.plan import PlanKind  # light: pydantic only, no store
    from gpuledger.optimizer.plan_status import STATUSES

    inherited = [global_options(suppress=True)]  # `plans list --warehouse X` works too
    p = verbs.add_parser("list", help="stored plans, newest first",
                         description="stored plans, newest first", parents=inherited)
    p.add_argument("--status", choices=STATUSES, help="only plans in this status")
    p.add_argument("--kind", choices=get_args(PlanKind), help="only plans of this kind")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=_list)

    s = verbs.add_parser("show", help="one plan as a readable diff or JSON",
                         description="one plan as a readable diff or JSON", parents=inherited)
    s.add_argument("plan_id", metavar="ID")
    s.add_argument("--format", choices=("table", "json"), default="table")
    s.set_defaults(handler=_show)
