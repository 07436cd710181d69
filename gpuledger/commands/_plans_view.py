"""`gpuledger plans list|show`: the read-only verbs over stored plans (the optimizer's side).

`list` prints one line per plan (newest first, `--status` filters); `show ID` prints the plan as
a readable diff, or as JSON with `-o json` (mig-parted entries in NVIDIA's field names); ID is
the full id, a unique prefix or `latest`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, plan_id_argument, runs
from gpuledger.commands._output import emit, render_table
from gpuledger.optimizer.plan.contract import PLAN_KINDS  # light: pydantic only, no store
from gpuledger.optimizer.plan.status import STATUSES

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import Plan
    from gpuledger.optimizer.plan.twin_effect import TwinEffect

_KINDS = PLAN_KINDS.names()
"""The registered plan kinds (their modules are listed, not imported)."""


def plan_text(plan: Plan, status: str | None, fmt: str, twin: TwinEffect | None = None) -> str:
    """A plan's readable diff with its baselines table laid out by the output layer (human
    headers, fitted to the terminal, numbers never split; `-o wide` whole); `twin`: the effect
    measured on the scheduling twin, shown beside the backtest."""
    from gpuledger.optimizer.plan.render import render_plan

    def layout(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
        return render_table(rows, columns, whole=fmt == "wide")

    return render_plan(plan, status, layout=layout, twin=twin)


def plan_rows(json_text: str) -> list[dict[str, Any]]:
    """Rows for csv/wide of one plan: one per entry of its first list of changes (nested values
    stay JSON in their cell), else one row of the plan's plain fields."""
    body = json.loads(json_text)
    for value in (body.get("changes") or {}).values():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return [{"plan_id": body.get("id"), **v} for v in value]
    return [{k: v for k, v in body.items() if not isinstance(v, dict | list)}]


@click.command("list", help="stored plans, newest first")
@click.option("--status", type=click.Choice(STATUSES), help="only plans in this status")
@click.option("--kind", type=click.Choice(_KINDS), help="only plans of this kind")
@output_option()
@runs
def list_command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.optimizer.plan.render import list_json, render_list
    from gpuledger.optimizer.plan.store import list_plans

    with ctx.open_warehouse(read_only=True) as wh:
        records = list_plans(wh, args.status, kind=args.kind)
    text = list_json(records)
    emit(ctx, args.format, json_text=text, rows=json.loads(text),
         columns=("id", "kind", "status", "created_at", "summary"),
         text=render_list(records) if args.format == "table" else None)
    return 0


@click.command("show", help="one plan as a readable diff or JSON (ID: id, unique prefix or 'latest')")
@plan_id_argument
@output_option()
@runs
def show_command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.optimizer.plan.render import plan_json
    from gpuledger.optimizer.plan.store import load_record, resolve_plan_id

    with ctx.open_warehouse(read_only=True) as wh:
        record = load_record(wh, resolve_plan_id(wh, args.plan_id))
    text = plan_json(record)
    shown = plan_text(record.plan, record.status, args.format, record.twin_effect) \
        if args.format == "table" else None
    emit(ctx, args.format, json_text=text, rows=plan_rows(text), text=shown)
    return 0


VERBS = (list_command, show_command)
