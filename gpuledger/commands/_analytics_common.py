"""Shared by `bill`, `idle` and `recommend`: the window and price flags, the bill's warnings
and a plain-text table.

Light on purpose (no heavy imports): the CLI imports command modules at start-up.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.window import Window

if TYPE_CHECKING:
    from gpuledger.analytics.bill import Bill
    from gpuledger.warehouse import Warehouse


def add_window_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--period", metavar="YYYY-MM", help="calendar month (UTC)")
    parser.add_argument("--start", metavar="TIME", help="window start, ISO-8601 (with --end)")
    parser.add_argument("--end", metavar="TIME", help="window end, exclusive, ISO-8601")


def add_price_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict-prices", action="store_true",
        help="fail on a GPU model with no price (in price_book or the default catalog) instead "
             "of billing its card-hours at zero on lines marked unpriced",
    )


def bill_warnings(bill: Bill) -> list[str]:
    """One line per thing the bill could not know, for stderr (the numbers still add up)."""
    import polars as pl

    out: list[str] = []
    if bill.unpriced_models:
        hours = bill.detail.group_by("model").agg(pl.col("unpriced_card_hours").sum())
        held = {str(m): float(h) for m, h in hours.iter_rows()}
        named = ", ".join(f"{m!r} ({held.get(m, 0.0):,.3f} card-hours)" for m in bill.unpriced_models)
        out.append(
            f"no price for GPU model {named}: billed at 0 on lines marked unpriced; add it to "
            f"`price_book` in the config (model: <name>, unit_price: <{bill.currency} per "
            "card-hour>), or pass --strict-prices to make this an error"
        )
    if bill.replicas_unknown_nodes:
        out.append(
            "time-slice replica count unknown on node(s) " + ", ".join(bill.replicas_unknown_nodes)
            + " (no nvidia.com/gpu.replicas label from the Kubernetes API or kube_node_labels): "
            "shares there use the replicas seen, which overcharges when replicas sit unused"
        )
    return out


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
