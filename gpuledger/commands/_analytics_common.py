"""Shared by `bill`, `idle` and `recommend`: the window flags and a plain-text table.

Light on purpose (no heavy imports): the CLI imports command modules at start-up.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.window import Window


def add_window_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--period", metavar="YYYY-MM", help="calendar month (UTC)")
    parser.add_argument("--start", metavar="TIME", help="window start, ISO-8601 (with --end)")
    parser.add_argument("--end", metavar="TIME", help="window end, exclusive, ISO-8601")


def window_from_args(args: argparse.Namespace) -> Window:
    if args.period and (args.start or args.end):
        raise InputError("give either --period or --start/--end, not both")
    if args.period:
        return Period.exact(args.period).window
    if args.start and args.end:
        return Window.parse(args.start, args.end)
    raise InputError("which window? give --period YYYY-MM or --start TIME --end TIME")


def _cell(value: Any, money: bool) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if money else f"{value:,.3f}"
    return str(value)


def text_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], money: Sequence[str] = ()) -> str:
    """Columns left-aligned for text, right-aligned for numbers."""
    cells = [[_cell(r.get(c), c in money) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), int | float) or r.get(c) is None for r in rows) for c in columns]

    def fmt(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out = [fmt(columns), fmt(["-" * w for w in widths])]
    out.extend(fmt(row) for row in cells)
    return "\n".join(out)
