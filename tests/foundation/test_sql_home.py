"""Only `warehouse/` speaks SQL: no other module of the product holds a statement.

The rule (docs/DESIGN.md, "Only `warehouse/` speaks SQL"; docs/decisions/0152) is checked over
the source, with `ast`, so it holds for code nobody ran. Every `.py` file the installed package
contains outside `warehouse/` (the roof `gpuledger/` and every linked stage folder) is read, and
a place is SQL when

- a string literal or f-string (its `{...}` parts read as a name) has a statement's shape:
  `SELECT … FROM`, `INSERT INTO`, `UPDATE <table> SET`, `DELETE FROM`, `CREATE [OR REPLACE]
  [TEMP] TABLE|VIEW|INDEX|SEQUENCE|SCHEMA|MACRO`, `DROP TABLE|VIEW|…`, `ALTER TABLE`,
  `ATTACH|DETACH <db>`, `COPY … TO|FROM <file>`, `WITH <name> AS (`, `PRAGMA <name>`; keywords in
  capitals, as every statement of the project is written, so English prose ("select the cards
  from a pool") never matches; strings standing alone as statements (docstrings) are prose and
  are not read;
- or a call passes a literal as its first argument to `.execute(`/`.executemany(`/`.sql(` (a
  DB-API or DuckDB call: any literal is a statement), or to `.query(`/`.scalar(` on a receiver
  named like a warehouse or connection (`wh`, `warehouse`, `con`, …): short statements such as
  `wh.scalar("SELECT 1")` or `con.execute("CHECKPOINT")` have no keyword pair to match, and a
  Prometheus client's `.query("up")` is not a warehouse.

Cases:
- the product outside `warehouse/` has no SQL, except the files of `ALLOWED`, and each of those
  still has some (so the list only shrinks: a file that lost its SQL must leave it);
- the detector can fail: each shape above, an f-string, a call with a short literal, is found
  at its line; prose in docstrings, English in messages and PromQL are not.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpuledger"
SQL_HOME = "warehouse"

ALLOWED: frozenset[str] = frozenset()
"""Files outside `warehouse/` still allowed SQL: none (the sampling and usage SQL moved into
`warehouse/queries` with issue 28)."""

_SHAPES = re.compile(
    r"""
      \bSELECT\b[\s\S]*?\bFROM\b
    | \bINSERT\s+(?:OR\s+[A-Z]+\s+)?INTO\b
    | \bUPDATE\s+[\w."]+(?:\s+[\w"]+)?\s+SET\b
    | \bDELETE\s+FROM\b
    | \bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:UNIQUE\s+)?
        (?:TABLE|VIEW|INDEX|SEQUENCE|SCHEMA|MACRO|TYPE)\b
    | \bDROP\s+(?:TABLE|VIEW|INDEX|SEQUENCE|SCHEMA|MACRO|TYPE)\b
    | \bALTER\s+TABLE\b
    | \b(?:ATTACH|DETACH)\s+(?:DATABASE\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?['"\w{$?]
    | \bCOPY\s+[\s\S]*?\b(?:TO|FROM)\s+['"{$?]
    | \bWITH\s+(?:RECURSIVE\s+)?\w+\s+AS\s*(?:NOT\s+)?(?:MATERIALIZED\s+)?\(
    | \bPRAGMA\s+\w+
    """,
    re.VERBOSE,
)
"""A statement's shape: keyword pairs that English prose does not write in capitals."""

STATEMENT_CALLS = frozenset({"execute", "executemany", "sql"})
"""Calls whose first argument is a statement whoever receives them (DB-API, DuckDB)."""
WAREHOUSE_CALLS = frozenset({"query", "scalar"})
"""The warehouse's read methods: a statement when the receiver is a warehouse or connection."""
WAREHOUSE_NAMES = frozenset({"wh", "warehouse", "con", "conn", "connection", "cursor", "duckdb", "db"})


def _text(node: ast.AST) -> str | None:
    """A string literal's text, or an f-string's with each `{...}` read as a name (`{}`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _receiver(func: ast.Attribute) -> str:
    """The last name of a call's receiver: `inputs.wh.query` → `wh`, `self.con.execute` → `con`."""
    value = func.value
    if isinstance(value, ast.Attribute):
        return value.attr
    if isinstance(value, ast.Name):
        return value.id
    return ""


def sql_places(source: str) -> list[tuple[int, str]]:
    """(line, what) of every place in `source` that holds SQL (see the module docstring)."""
    tree = ast.parse(source)
    prose: set[int] = set()   # string statements (docstrings) and the pieces inside f-strings
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and _text(node.value) is not None:
            prose.add(id(node.value))
        if isinstance(node, ast.JoinedStr):
            prose.update(id(v) for v in ast.walk(node) if v is not node)
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            name = node.func.attr
            literal = _text(node.args[0])
            on_warehouse = name in WAREHOUSE_CALLS and _receiver(node.func) in WAREHOUSE_NAMES
            if literal is not None and (name in STATEMENT_CALLS or on_warehouse):
                found.setdefault(node.lineno, f".{name}({' '.join(literal.split())[:50]!r})")
                prose.add(id(node.args[0]))  # one place, named once
    for node in ast.walk(tree):
        text = _text(node)
        match = _SHAPES.search(text) if text is not None and id(node) not in prose else None
        if match:
            found.setdefault(getattr(node, "lineno", 0), " ".join(match.group(0).split())[:60])
    return sorted(found.items())


def product_files() -> dict[str, Path]:
    """Every `.py` of the installed package outside `warehouse/`, by its path in the repository
    (a linked stage's files under their stage folder: `analytics/devices/mig.py`)."""
    out: dict[str, Path] = {}
    for folder, dirs, files in os.walk(PACKAGE, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in files:
            path = Path(folder, name)
            if name.endswith(".py"):
                out[path.resolve().relative_to(ROOT).as_posix()] = path
    return {rel: path for rel, path in sorted(out.items()) if not rel.startswith(f"{SQL_HOME}/")}


def test_only_the_warehouse_speaks_sql() -> None:
    files = product_files()
    assert {"analytics/devices/mig.py", "gpuledger/cli.py", "core/table_spec.py"} <= set(files)
    assert not any(rel.startswith(f"{SQL_HOME}/") for rel in files)
    places = {rel: sql_places(path.read_text(encoding="utf-8")) for rel, path in files.items()}
    offending = [f"{rel}:{line}: {what}" for rel, found in places.items() if rel not in ALLOWED
                 for line, what in found]
    assert not offending, (
        "SQL outside warehouse/ (move it into a named function of warehouse/queries/<consumer>.py):\n"
        + "\n".join(offending))
    moved = sorted(rel for rel in ALLOWED if not places.get(rel))
    assert not moved, f"no SQL left in {moved}: take them out of ALLOWED in {__file__}"


@pytest.mark.parametrize("source", [
    'Q = "SELECT node, model FROM gpus"',
    'Q = """\nWITH t AS (\n  SELECT 1 AS x\n)\nSELECT x FROM t"""',
    'Q = "WITH last AS (SELECT max(ts) AS ts FROM s) SELECT 1"',
    'def f(name):\n    return f"SELECT * FROM {name}"',
    'Q = "INSERT INTO plans VALUES (?, ?)"',
    'Q = "INSERT OR REPLACE INTO plans VALUES (?)"',
    'Q = "UPDATE plans SET status = ?"',
    'Q = "DELETE FROM gpu_samples WHERE ts < ?"',
    'Q = "CREATE TABLE IF NOT EXISTS t (a INT)"',
    'Q = "CREATE OR REPLACE TEMP VIEW v AS SELECT 1"',
    'def f(path):\n    return f"ATTACH \'{path}\' AS lake (READ_ONLY)"',
    'def f(path):\n    return f"COPY (SELECT 1) TO \'{path}\' (FORMAT parquet)"',
    'Q = "PRAGMA table_info(\'gpus\')"',
    'Q = "DROP TABLE t"',
    'Q = "ALTER TABLE gpus ADD COLUMN spacing_us BIGINT"',
    'def f(wh):\n    return wh.scalar("SELECT 1")',
    'def f(inputs):\n    return inputs.wh.query("SHOW TABLES")',
    'def f(con):\n    con.execute("CHECKPOINT")',
    'def f(self):\n    self.con.execute(f"SET threads = {4}")',
])
def test_the_detector_finds_sql(source: str) -> None:
    places = sql_places("import x\n\n" + source)
    assert places, source
    assert places[0][0] >= 3  # the line of the statement, not of the module


def test_the_detector_names_the_line() -> None:
    source = 'A = 1\nB = ("SELECT uuid"\n     " FROM gpus")\n\n\ndef f(wh):\n    return wh.scalar("SELECT 2")\n'
    assert [line for line, _ in sql_places(source)] == [2, 7]


@pytest.mark.parametrize("source", [
    '"""Select the cards from a pool; with a layout as (the planner wants) it; update them."""',
    'def f():\n    """SELECT … FROM in a docstring is prose about SQL, not a statement."""',
    'class C:\n    x = 1\n    """The rows SELECT … FROM would return (an attribute\'s docstring)."""',
    'M = "select the plan from the list, then copy it to the clipboard"',
    'M = "create a table of teams; insert into the report; delete from the cache"',
    'def f(http, span):\n    return http.query(f"last_over_time(kube_node_labels[{span}])")',
    'def f(client):\n    return client.query("up")',
    'E = "CASE WHEN isfinite(x) AND x >= 0 THEN x END"',
    'H = "With this AS the default (see below)"',
])
def test_the_detector_leaves_prose_alone(source: str) -> None:
    assert sql_places(source) == []
