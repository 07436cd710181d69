"""Versioned schema migrations, frozen as literal DDL.

Each version is one step in `warehouse/migrations/` (a `.sql` file written once and never
edited), so a file created by any earlier release is brought forward by exactly the steps it
lacks. Opening an older file applies the missing steps in one transaction; a file whose version
is newer than `LATEST` is refused, because an older binary cannot know what the newer columns
mean. `declared_ddl()` is what the steps must add up to: the tables `core.frames` declares,
plus the objects it does not describe (`SUPPORT_DDL`); a test compares the two catalogs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from gpuledger.core.errors import SchemaVersionError
from gpuledger.core.frames import TABLES
from gpuledger.warehouse.migrations import STEPS

Migration = Callable[[duckdb.DuckDBPyConnection], None]


@dataclass(frozen=True, slots=True)
class SqlMigration:
    """A step that runs its literal DDL text (DuckDB runs the `;`-separated statements)."""

    sql: str

    def __call__(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute(self.sql)


MIGRATIONS: tuple[tuple[int, str, Migration], ...] = tuple(
    (step.version, step.description, SqlMigration(step.sql())) for step in STEPS
)
LATEST = MIGRATIONS[-1][0]

SUPPORT_DDL: tuple[str, ...] = (
    "CREATE SEQUENCE IF NOT EXISTS audit_seq START 1",
    "CREATE INDEX IF NOT EXISTS gpu_samples_ts ON gpu_samples (ts)",
)
"""Objects of the latest schema that `core.frames` does not declare: the audit log's sequence
and the time index on raw samples. A step that changes them changes this list too."""


def declared_ddl() -> list[str]:
    """The DDL of the latest schema as the code declares it (not as the steps build it)."""
    return [spec.ddl() for spec in TABLES.values()] + list(SUPPORT_DDL)


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
