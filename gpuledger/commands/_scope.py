"""Flags `bill`, `idle` and `recommend` share: which team / namespace, grouped by what.

A module of its own (leading `_`: not a command) so the three commands spell `--team`,
`--namespace` and `--by owner|label:<key>` once. Light on purpose: click only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

WORKLOAD_HELP = ("owner (Deployment, StatefulSet, Job, notebook: replicas and GPUs summed), pod "
                 "(a multi-GPU pod once), allocation (one row per pod and GPU) or label:<key>")


def scope_options(func: F) -> F:
    """`--team` and `--namespace`: only that team's / namespace's rows."""
    func = click.option("--namespace", default=None, help="only this namespace")(func)
    return click.option("--team", default=None, help="only this team")(func)


def workload_option(default: str = "owner", extra: str = "") -> Callable[[F], F]:
    """`--by owner|pod|allocation|label:<key>` (plus `extra`, a grouping only this command
    has): what one row is."""
    text = f"{WORKLOAD_HELP}, or {extra}" if extra else WORKLOAD_HELP
    return click.option("--by", "by", default=default, show_default=True, help=text)
