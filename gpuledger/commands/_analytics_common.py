"""Shared by the commands that bill (`bill`, `idle`, `recommend`, `budgets`, `report`): the
window they read, the bill's warnings and the empty-window warning, and `--as-computed` (every
command that bills takes it). (The other flags are decorators in `gpuledger.commands`.)

Light on purpose (no heavy imports): the CLI imports command modules at start-up.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.window import Window

if TYPE_CHECKING:
    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.commands import F
    from gpuledger.warehouse import Warehouse


def as_computed_option(f: F) -> F:
    """`--as-computed`: bill the hourly roll-up under the rules it was stored under (named in the
    bill) instead of refusing hours rolled up under other rules whose raw samples are gone
    (docs/decisions/0147)."""
    return click.option(
        "--as-computed", is_flag=True,
        help="bill the hourly roll-up as it was computed, under the rules it was stored under "
             "(their fingerprint and values are in the bill), not today's settings",
    )(f)


def bill_warnings(bill: Bill) -> list[str]:
    """One line per thing the bill could not know, for stderr (`analytics.billing.notes`: the
    same lines every surface that bills shows)."""
    from gpuledger.analytics.billing.notes import bill_notes

    return bill_notes(bill)


def coverage_warning(wh: Warehouse, window: Window) -> str | None:
    """The line that says a window holds no data, naming the range the warehouse does cover (a
    bill of zeros with exit 0 would otherwise look like an idle fleet)."""
    from gpuledger.warehouse.queries.freshness import data_range, newest_sample

    newest = newest_sample(wh, before=window.end)
    if newest is not None and newest >= window.start:
        return None
    span = data_range(wh)
    where = ("the warehouse holds no samples yet" if span is None
             else f"the warehouse covers {span[0]:%Y-%m-%dT%H:%MZ} .. {span[1]:%Y-%m-%dT%H:%MZ}")
    return (f"no samples in [{window.start:%Y-%m-%dT%H:%MZ}, {window.end:%Y-%m-%dT%H:%MZ}): "
            f"the numbers are all zero; {where}")


def warn(lines: Sequence[str]) -> None:
    for line in lines:
        print(f"gpuledger: warning: {line}", file=sys.stderr, flush=True)


def window_from_args(args: argparse.Namespace) -> Window:
    """`--start/--end`, else `--period` (YYYY-MM or `last`), else the last complete month."""
    if args.period and (args.start or args.end):
        raise InputError("give either --period or --start/--end, not both")
    if args.start or args.end:
        if not (args.start and args.end):
            raise InputError("give both --start TIME and --end TIME (or --period YYYY-MM|last)")
        return Window.parse(args.start, args.end)
    return Period.parse(args.period or "last").window
