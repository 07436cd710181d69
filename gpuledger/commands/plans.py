"""`gpuledger plans …`: list and show stored plans; approve, reject, apply, roll back, export.

The read-only verbs (the optimizer's side) live in `_plans_view`, the verbs that change a
plan's state or the cluster (the actuator's side) in `_plans_actions`; this module only
assembles them under one `plans` command. Every verb taking an ID accepts the full id, a
unique prefix of one, or `latest` (`optimizer.plan.store.resolve_plan_id`).
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import VerbGroup, runs


@click.group("plans", cls=VerbGroup, invoke_without_command=True,
             help="list, show, approve, reject, apply, roll back and export plans")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    click.echo(click.get_current_context().get_help())
    return 2


def _assemble() -> None:
    from gpuledger.commands import _plans_actions, _plans_export, _plans_view

    for verb in (*_plans_view.VERBS, *_plans_actions.VERBS, *_plans_export.VERBS):
        command.add_command(verb)


_assemble()
