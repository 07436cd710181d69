"""The one output layer: `-o/--output table|wide|csv|json|yaml` for every command that prints data.

Why one layer: the five formats must carry the same data (a script that switches from csv to
json must not lose a column), and tables must fit the terminal. `table` shows the chosen
columns, `wide` every column; both go through rich, fitted to the terminal width on a
terminal (or to `$COLUMNS` when set) and printed whole, without ANSI codes, into a pipe or a
file. `csv` is the same rows; `json` is the command's document (its exact text when the
command passes `json_text`, so today's `--format json` output stays byte-identical) and
`yaml` is that same document. Table headers say "GPU-hours" where a key says `card_hours`
(`heading`); the machine formats keep the keys.

`--format` is kept as a hidden alias of `--output` (users' scripts depend on it).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from gpuledger.command_context import Context

FORMATS = ("table", "wide", "csv", "json", "yaml")
F = TypeVar("F", bound=Callable[..., Any])
_UNLIMITED = 100_000
"""The width a table gets when nothing measures one (a pipe): wide enough never to wrap."""


class _AliasOption(click.Option):
    """An option whose help names only its first two flags (`-o/--output`): `--format` works
    but is not advertised."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        return record[0].replace(", --format", ""), record[1]


def output_option(formats: Sequence[str] = FORMATS, default: str = "table") -> Callable[[F], F]:
    """`-o/--output` (alias `--format`) limited to `formats`; arrives as `args.format`."""
    return click.option(
        "-o", "--output", "--format", "format", cls=_AliasOption, type=click.Choice(formats),
        default=default, show_default=True, help="output format",
    )


def emit(
    ctx: Context, fmt: str, *, rows: Sequence[Mapping[str, Any]] = (),
    columns: Sequence[str] = (), document: Any = None, json_text: str | None = None,
    title: str | None = None, footer: Sequence[str] = (), money: Sequence[str] = (),
    csv_text: str | None = None, text: str | None = None,
) -> None:
    """Print data in `fmt`. `rows` feed table/wide/csv (`columns` picks the table's), `document`
    (or `json_text`) json and yaml; `text`, when given, replaces the table (a readable diff)."""
    if fmt == "json":
        ctx.echo(json_text if json_text is not None else json.dumps(document, indent=2, default=str))
    elif fmt == "yaml":
        import yaml

        data = json.loads(json_text) if json_text is not None else json.loads(
            json.dumps(document, default=str))
        ctx.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))
    elif fmt == "csv":
        text = csv_text if csv_text is not None else write_csv(rows, all_columns(rows, columns))
        ctx.echo(text.rstrip("\n"))
    else:
        if title:
            ctx.echo(title)
        if text is not None:
            ctx.echo(text)
        else:
            shown = all_columns(rows, columns) if fmt == "wide" else list(columns or all_columns(rows, ()))
            ctx.echo(render_table(rows, shown, money))
        for line in footer:
            ctx.echo(line)


def all_columns(rows: Sequence[Mapping[str, Any]], first: Sequence[str]) -> list[str]:
    """`first`, then every other key the rows carry, in order of appearance."""
    out = list(first)
    for row in rows:
        out.extend(k for k in row if k not in out)
    return out


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(row.get(c)) for c in columns])
    return buf.getvalue().rstrip("\n")


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def cell(value: Any, money: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:,.2f}" if money else f"{value:,.3f}"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    return str(value)


def heading(column: str) -> str:
    """The header a person reads for a data key. Issue #15's one term: the `card_hours` keys
    read "GPU-hours" (`idle_card_hours` -> "idle GPU-hours"); every other key as it is. Only
    table/wide headers: csv/json/yaml keep the keys, which scripts depend on."""
    if "card_hours" not in column:
        return column
    return column.replace("card_hours", "GPU-hours").replace("_", " ")


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def table_width() -> int | None:
    """The width to fit: `$COLUMNS` when set, the terminal's on a terminal, else unlimited."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str],
                 money: Sequence[str] = (), width: int | None = None, *, rule: bool = True) -> str:
    """A rich table as plain text: header, a rule, rows; numbers right-aligned. Fitted to
    `width` (default `table_width()`): rich wraps or folds the widest cells to fit, so no
    column is dropped; numbers stay whole unless even that cannot fit. `rule=False` leaves out
    the line under the header."""
    fit = width if width is not None else table_width()
    cells = [[cell(r.get(c), c in money) for c in columns] for r in rows]
    numeric = [bool(rows) and all(_is_number(r.get(c)) for r in rows) for c in columns]
    text = _render(cells, columns, numeric, fit, rule=rule, whole_numbers=True)
    if fit is not None and max((len(line) for line in text.splitlines()), default=0) > fit:
        text = _render(cells, columns, numeric, fit, rule=rule, whole_numbers=False)
    return text


def _render(cells: Sequence[Sequence[str]], columns: Sequence[str], numeric: Sequence[bool],
            fit: int | None, *, rule: bool, whole_numbers: bool) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD if rule else None, show_edge=False, pad_edge=False,
                  header_style="", expand=False)
    for i, c in enumerate(columns):
        whole = max((len(row[i]) for row in cells), default=0) if numeric[i] and whole_numbers else None
        table.add_column(heading(c), justify="right" if numeric[i] else "left", overflow="fold",
                         min_width=whole)
    for row in cells:
        table.add_row(*row)
    console = Console(file=io.StringIO(), width=fit or _UNLIMITED, color_system=None,
                      force_terminal=False, no_color=True, highlight=False, emoji=False)
    with console.capture() as captured:
        console.print(table, soft_wrap=False, crop=False)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    return "\n".join(line for line in lines if line)
