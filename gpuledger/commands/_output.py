"""The one output layer: `-o/--output table|wide|csv|json|yaml` for every command that prints data.

Why one layer: the five formats must carry the same data (a script that switches from csv to
json must not lose a column), and tables must fit the terminal. `table` shows the chosen
columns, `wide` every column; both are laid out here (`_render`), fitted to the terminal width on a
terminal (or to `$COLUMNS` when set) and printed whole, without ANSI codes, into a pipe or a
file. `wide` prints every identifier whole (no fitting); `table` never splits a number (text cells
end in an ellipsis instead; issue 32). `csv` is the same rows, money at the currency's
decimals (`core.money`); `json` is the command's document (its exact text when the
command passes `json_text`, so today's `--format json` output stays byte-identical) and
`yaml` is that same document. Table headers are for people, with units ("GPU-hours" where a
key says `card_hours`, "cost (USD)", "used (%)"; `heading`); the machine formats keep the keys.

`--format` is kept as a hidden alias of `--output` (users' scripts depend on it).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from gpuledger.command_context import Context

FORMATS = ("table", "wide", "csv", "json", "yaml")
F = TypeVar("F", bound=Callable[..., Any])


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
        text = csv_text if csv_text is not None else write_csv(
            rows, all_columns(rows, columns), money=money, currency=ctx.settings.currency)
        ctx.echo(text.rstrip("\n"))
    else:
        width = None if fmt == "wide" else table_width()
        for line in ([title] if title else []):
            ctx.echo(_wrapped(line, width))
        if text is not None:
            ctx.echo(text)
        else:
            shown = all_columns(rows, columns) if fmt == "wide" else list(columns or all_columns(rows, ()))
            ctx.echo(render_table(rows, shown, money, currency=ctx.settings.currency, whole=fmt == "wide"))
        for line in footer:
            ctx.echo(_wrapped(line, width))


def _wrapped(line: str, width: int | None) -> str:
    """A title or footer line wrapped at spaces to `width` (as is when None: a pipe, `-o wide`),
    never inside a word, so a number is never split."""
    if width is None:
        return line
    return "\n".join(part if len(part) <= width else "\n".join(textwrap.wrap(
        part, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False))
        for part in line.split("\n"))


def all_columns(rows: Sequence[Mapping[str, Any]], first: Sequence[str]) -> list[str]:
    """`first`, then every other key the rows carry, in order of appearance."""
    out = list(first)
    for row in rows:
        out.extend(k for k in row if k not in out)
    return out


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, money: Sequence[str] = (),
              currency: str = "USD") -> str:
    """CSV of `rows`; the `money` columns with the currency's decimals (`core.money.fixed`)."""
    from gpuledger.core.money import fixed

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([fixed(_number(row.get(c)), currency) if c in money else _csv_cell(row.get(c))
                         for c in columns])
    return buf.getvalue().rstrip("\n")


def frame_csv(frame: Any, money: Sequence[str], currency: str) -> str:
    """A polars frame's CSV with its `money` columns at the currency's decimals (every other
    column as polars writes it): `bill`, `idle`, `budgets -o csv`."""
    from gpuledger.core.money import fixed_columns

    return str(fixed_columns(frame, money, currency).write_csv())


def _number(value: Any) -> float | None:
    return None if value is None or value == "" else float(value)


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def cell(value: Any, money: bool = False, percent: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if percent:
            return f"{value:.1%}"
        return f"{value:,.2f}" if money else f"{value:,.3f}"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    return str(value)


HEADINGS: Mapping[str, str] = {
    "redistributed_cost": "redistributed", "monthly_saving": "saving/month", "used_ratio": "used",
    "forecast_ratio": "forecast used", "idle_fraction": "idle", "workload_kind": "kind of workload",
    "workload_profile": "profile", "gpus": "GPUs",
}
"""Headers a person reads for data keys where the rule of `heading` (issue #15's one term:
`card_hours` reads "GPU-hours"; `_` a space) does not give it."""
_PERCENT_SUFFIXES = ("_ratio", "_fraction", "_share")


def is_percent(column: str) -> bool:
    """A key holding a share of one (`used_ratio` 1.108): shown as a percentage (110.8%)."""
    return column.endswith(_PERCENT_SUFFIXES)


def heading(column: str, *, money: bool = False, currency: str | None = None) -> str:
    """The header a person reads for a data key, with its unit: "GPU-hours", "cost (USD)",
    "used (%)". Only table/wide headers: csv/json/yaml keep the keys, which scripts depend on."""
    name = HEADINGS.get(column) or column.replace("card_hours", "GPU-hours").replace("_", " ")
    if money and currency:
        return f"{name} ({currency})"
    if is_percent(column):
        return f"{name} (%)"
    return name


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
                 money: Sequence[str] = (), width: int | None = None, *, rule: bool = True,
                 currency: str | None = None, whole: bool = False) -> str:
    """A table as plain text: header, a rule, rows; numbers right-aligned. Fitted to
    `width` (default `table_width()`): a number is never split or cut (its column is as wide as
    its widest cell); text cells end in an ellipsis to fit, one line per row. `whole` (`-o
    wide`): nothing is cut, the table as wide as its cells. `rule=False` leaves out the line
    under the header."""
    fit = None if whole else (width if width is not None else table_width())
    percent = [is_percent(c) for c in columns]
    cells = [[cell(r.get(c), c in money, p) for c, p in zip(columns, percent, strict=True)] for r in rows]
    numeric = [bool(rows) and all(_is_number(r.get(c)) for r in rows) for c in columns]
    heads = [heading(c, money=c in money, currency=currency) for c in columns]
    return _render(cells, heads, numeric, fit, rule=rule)


GAP = "  "
MIN_TEXT = 8
"""The narrowest a text column is squeezed to (an ellipsis and a few characters)."""


def cut(text: str, width: int) -> str:
    """`text` in `width` characters, an ellipsis marking a cut (two names never read the same)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _render(cells: Sequence[Sequence[str]], heads: Sequence[str], numeric: Sequence[bool],
            fit: int | None, *, rule: bool) -> str:
    """Lay out the table: 1. a number column as wide as its widest cell (never split, never
    cut), its header on one line if the table fits, else wrapped at its words;
    2. a text column as wide as its widest cell, then, while the table is wider than
    `fit`, the widest text column loses a character (down to `MIN_TEXT`); 3. while it is still
    too wide, the last column is left out (never the first), and a line under the table names
    what was left out (`-o wide` shows it); 4. headers wrap at their words to the column's
    width; cells too long end in "…"."""

    def longest_word(head: str) -> int:
        return max((len(w) for w in head.split()), default=0)

    widths = [max([len(row[i]) for row in cells] + [len(h)]) for i, h in enumerate(heads)]
    keep = len(heads)

    def over() -> int:
        return sum(widths[:keep]) + len(GAP) * (keep - 1) - (fit or 0)

    if fit is not None and over() > 0:  # first the headers wrap at their words
        widths = [max([len(row[i]) for row in cells] + [longest_word(h)]) for i, h in enumerate(heads)]

    while fit is not None and over() > 0:
        texts = [i for i in range(keep)
                 if not numeric[i] and widths[i] > max(MIN_TEXT, longest_word(heads[i]))]
        if texts:
            widths[max(texts, key=lambda i: widths[i])] -= 1
        elif keep > 1:
            keep -= 1
        else:
            break

    def line(parts: Sequence[str]) -> str:
        return GAP.join(p.rjust(widths[i]) if numeric[i] else p.ljust(widths[i])
                        for i, p in enumerate(parts[:keep])).rstrip()

    wrapped = [textwrap.wrap(h, w) or [""] for h, w in zip(heads, widths, strict=True)]
    depth = max((len(w) for w in wrapped[:keep]), default=1)
    out = [line([(w[k - (depth - len(w))] if k >= depth - len(w) else "") for w in wrapped])
           for k in range(depth)]  # headers aligned at their last line
    if rule:
        out.append(GAP.join("─" * w for w in widths[:keep]))
    for row in cells:
        out.append(line([c if numeric[i] else cut(c, widths[i]) for i, c in enumerate(row)]))
    if keep < len(heads):
        note = f"(not shown at {fit} columns: {', '.join(heads[keep:])}; `-o wide` shows every column)"
        out.extend(textwrap.wrap(note, fit or len(note)))
    return "\n".join(out)
