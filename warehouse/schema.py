"""Versioned schema migrations.

Version 1 creates every table declared in `core.frames`. A later change appends a migration
(never edits an old one). Opening an older file applies the missing migrations in one
transaction; a file whose version is newer than `LATEST` is refused, because an older binary
cannot know what the newer columns mean.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from gpuledger.core.errors import SchemaVersionError
from gpuledger.core.frames import TABLES

Migration = Callable[[duckdb.DuckDBPyConnection], None]


def _v1_initial(con: duckdb.DuckDBPyConnection) -> None:
    for spec in TABLES.values():
        con.execute(spec.ddl())
    con.execute("CREATE SEQUENCE IF NOT EXISTS audit_seq START 1")
    con.execute(
        "CREATE INDEX IF NOT EXISTS gpu_samples_ts ON gpu_samples (ts)"
    )


MIGRATIONS: tuple[tuple[int, str, Migration], ...] = (
    (1, "initial schema", _v1_initial),
)
LATEST = MIGRATIONS[-1][0]


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchall()
    if not exists[0][0]:
        return 0
    rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0]) if rows[0][0] is not None else 0


def migrate(con: duckdb.DuckDBPyConnection, path: str) -> int:
    """Bring the file to `LATEST`; return the version it had before."""
    before = current_version(con)
    if before > LATEST:
        raise SchemaVersionError(
            f"{path}: warehouse schema version {before} is newer than this gpuledger supports "
            f"({LATEST}); upgrade gpuledger instead of opening it with an older one"
        )
    if before == LATEST:
        return before
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMPTZ)"
        )
        for version, description, apply in MIGRATIONS:
            if version > before:
                apply(con)
                con.execute(
                    "INSERT INTO schema_version VALUES (?, ?, now())", [version, description]
                )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return before
