"""`gpuledger plans …`: list and show stored plans; approve, reject, apply, roll back.

The read-only verbs (the optimizer's side) live in `_plans_view`, the verbs that change a
plan's state or the cluster (the actuator's side) in `_plans_actions`; this module only
assembles them under one `plans` command.
"""

from __future__ import annotations

import argparse

from gpuledger.command_context import Context
from gpuledger.commands import AddCommand


def _no_verb(args: argparse.Namespace, ctx: Context) -> int:
    args.plans_parser.print_help()
    return 2


def register(add_command: AddCommand) -> None:
    parser = add_command("plans", "list, show, approve, reject, apply and roll back plans", _no_verb)
    parser.set_defaults(plans_parser=parser)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    from gpuledger.commands import _plans_actions, _plans_view

    _plans_view.register_verbs(verbs)
    _plans_actions.register_verbs(verbs)
