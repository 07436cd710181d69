"""Tables for people (issue 32): numbers never split, headers with units, money CSVs at the
currency's decimals.

Cases:
- `bill`, `idle` and `recommend` at `COLUMNS=80` and `120` (subprocesses, as a terminal user runs
  them): every line fits the width, and every money figure of the JSON document appears whole
  on one line of the table, formatted here (`f"{v:,.2f}"`), for the columns the table shows;
- the table layout, fed numbers wider than half the terminal: each appears whole, the columns
  that do not fit are named under the table (`-o wide` prints them), text ends in "…";
- `-o wide` prints identifiers whole, however long;
- headers are for people: "GPU-hours", "cost (USD)", "used (%)"; the csv/json keys stay;
- `bill`, `idle`, `budgets` and `recommend -o csv`: every money column has at most the
  currency's 2 decimals (counted here on the text), and equals the JSON figure to the cent.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.commands._output import render_table

REPO = Path(__file__).resolve().parents[2]
SPAN = ["--start", "2026-11-02T00:00:00Z", "--end", "2026-11-02T06:00:00Z"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "w.duckdb"
    assert main(["--warehouse", str(path), "simulate", "--gpus", "16", "--load", *SPAN]) == 0
    return path


def _run(warehouse: Path, *argv: str, columns: int | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = str(columns)
    done = subprocess.run([sys.executable, "-m", "gpuledger", "--warehouse", str(warehouse), *argv],
                          capture_output=True, text=True, env=env, timeout=600, check=True)
    return done.stdout


def _rows(text: str) -> list[str]:
    """The rule and the rows under it (titles, headers and footers aside)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    end = rule + 1
    while end < len(lines) and lines[end].strip() and not lines[end].startswith(
            ("Fleet:", "Data as of", "(not shown", "Not listed", "Saving per team")):
        end += 1
    return lines[rule:end]


CELL = re.compile(r"^(-?\d{1,3}(,\d{3})*(\.\d{2}|\.\d{3})?|\d+(\.\d)?%|-|[^\d].*|\d.*[^\d.,%].*)$")
"""A cell as the table prints it: a whole number, money (2 decimals), a quantity (3), a share
(a %; reasons quote "92%"), "-", or text. A number cut in two ("28,315.1" then "9") matches none."""


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize(("argv", "key", "money"), [
    (["bill"], "lines", "cost"),
    (["idle", "--by", "pod"], "workloads", "idle_cost"),
    (["recommend", "--all"], "recommendations", "monthly_saving"),
])
def test_numbers_never_split(warehouse: Path, width: int, argv: list[str], key: str, money: str) -> None:
    table = _run(warehouse, *argv, *SPAN, columns=width)
    document = json.loads(_run(warehouse, *argv, *SPAN, "-o", "json"))
    rows = _rows(table)
    assert max(len(line) for line in rows) <= width, table
    cells = [cell for line in rows[1:] for cell in line.split()]
    assert all(CELL.match(cell) for cell in cells), [c for c in cells if not CELL.match(c)]
    figures = [f"{float(row[money]):,.2f}" for row in document[key][:10]]
    assert len(rows) > 1 or not document[key], table
    for figure in figures:  # whole, on one line: never "28,315.1" / "9"
        assert figure in cells, (figure, table)


def test_layout_keeps_digits_and_names_what_it_leaves_out() -> None:
    rows = [{"pod": f"serving/llama-3-1-70b-instruct-{i:04d}-abcdef", "team": "research",
             **{f"m{j}": 1_234_567.891 * (i + 1) * (j + 1) for j in range(6)}} for i in range(3)]
    columns = ["pod", "team", *(f"m{j}" for j in range(6))]
    text = render_table(rows, columns, money=tuple(columns[2:]), width=80, currency="USD")
    lines = text.splitlines()
    assert max(len(line) for line in lines if not line.startswith("(")) <= 80, text
    cells = {cell for line in lines for cell in line.split()}
    kept = [c for c in columns[2:] if any(f"m{c[1]} (USD)" in " ".join(lines[:3]) for _ in (0,))]
    for row in rows:
        for c in columns[2:]:
            figure = f"{row[c]:,.2f}"
            assert figure in cells or c not in kept, (figure, text)
    assert "…" in text  # the pod names were cut, as text is
    left_out = [c for c in columns[2:] if f"{c} (USD)" not in " ".join(lines)]
    if left_out:
        assert "-o wide" in text and all(c in text for c in left_out)
    wide = render_table(rows, columns, money=tuple(columns[2:]), whole=True, currency="USD")
    assert all(str(r["pod"]) in wide for r in rows) and "…" not in wide


def test_headers_carry_units(warehouse: Path) -> None:
    text = _run(warehouse, "bill", *SPAN, columns=200)
    head = " ".join(text.splitlines()[1:3])
    assert "GPU-hours" in head and "cost (USD)" in head and "card_hours" not in head
    budgets = _run(warehouse, "budgets", *SPAN, "-o", "wide", columns=200)
    assert "used (%)" in budgets and "forecast used (%)" in budgets and "used_ratio" not in budgets


_DECIMALS = re.compile(r"^-?\d+(?:\.(\d+))?$")


@pytest.mark.parametrize(("argv", "money"), [
    (["bill", "--by", "team,model"], ("list_cost", "sharing_discount", "redistributed_cost", "cost", "idle_cost")),
    (["idle", "--by", "pod"], ("idle_cost",)),
    (["recommend", "--all"], ("monthly_saving",)),
    (["budgets"], ("budget", "used", "left", "forecast")),
])
def test_csv_money_has_the_currency_decimals(warehouse: Path, argv: list[str], money: tuple[str, ...]) -> None:
    rows = list(csv.DictReader(io.StringIO(_run(warehouse, *argv, *SPAN, "-o", "csv"))))
    assert rows
    for row in rows:
        for column in money:
            if column not in row or row[column] == "":
                continue
            match = _DECIMALS.match(row[column])
            assert match and len(match.group(1) or "") <= 2, (column, row[column])


def test_titles_and_footers_wrap_at_words(warehouse: Path) -> None:
    """Not only the table: the title ("22 recommendations …") and the lines under it ("Saving
    per team and month: …", 150 characters) fit 80 columns, wrapped at spaces (each team's
    figure whole); a pipe (no COLUMNS) gets each on one line."""
    narrow = _run(warehouse, "recommend", *SPAN, columns=80)
    piped = _run(warehouse, "recommend", *SPAN)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    saving = next(line for line in piped.splitlines() if line.startswith("Saving per team"))
    assert len(saving) > 80  # the case: a footer wider than the terminal
    start = narrow.index("Saving per team")
    assert " ".join(narrow[start:].split()).startswith(" ".join(saving.split()))
    assert "-0%" not in narrow + piped  # a profile's idle share from float noise below zero
