"""A warehouse file as an earlier release left it, for the tests and benches of a migration.

Why here: a migration is proven on a file the previous release wrote, so the file is built from
the frozen step texts (`warehouse.migrations.STEPS`) and recorded the way 0.1.0 recorded
versions, independently of today's `warehouse.schema.migrate`.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpuledger.warehouse import migrations

PREVIOUS_RELEASE_BOOTSTRAP = (
    "CREATE TABLE IF NOT EXISTS schema_version "
    "(version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMPTZ)"
)
"""How gpuledger 0.1.0 recorded versions (literal, independent of today's code)."""


def released_file(path: Path, version: int) -> duckdb.DuckDBPyConnection:
    """An open connection to a new file at `path` holding steps 1..`version`, each recorded."""
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute(PREVIOUS_RELEASE_BOOTSTRAP)
    for step in migrations.STEPS[:version]:
        con.execute(step.sql())
        con.execute("INSERT INTO schema_version VALUES (?, ?, now())", [step.version, step.description])
    return con
