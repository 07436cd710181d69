"""Versioned schema migrations, frozen as literal DDL.

Each version is one step in `warehouse/migrations/` (a `.sql` file written once and never
edited), so a file created by any earlier release is brought forward by exactly the steps it
lacks. Opening an older file applies the missing steps in one transaction; a file whose version
is newer than `LATEST` is refused, because an older binary cannot know what the newer columns
mean. `declared_ddl()` is what the steps must add up to: the tables `core.frames` declares,
plus the objects it does not describe (`SUPPORT_DDL`); a test compares the two catalogs.

Whose file: a writer creates gpuledger's tables only in an empty file or in one of its own
(`gpuledger_meta` says `application = gpuledger`, or, for files from before that marker, the
exact version-1 layout); another application's non-empty DuckDB file is refused untouched
(`foreign_objects`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from gpuledger.core.errors import SchemaVersionError
from gpuledger.core.frames import TABLES
from gpuledger.core.table_spec import TableSpec
from gpuledger.warehouse.migrations import STEPS
from gpuledger.warehouse.sample_fingerprints import ALL as FINGERPRINTED
from gpuledger.warehouse.sample_layout import DDL as SAMPLE_LAYOUT_DDL

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
    "CREATE TABLE IF NOT EXISTS gpuledger_meta (\n  key VARCHAR NOT NULL,\n"
    "  value VARCHAR NOT NULL,\n  PRIMARY KEY (key)\n)",
    *(kind.ddl for kind in FINGERPRINTED),
)
"""Objects of the latest schema that `core.frames` does not declare: the audit log's sequence
and the file marker table (v2; v3 dropped the time index on raw samples, zone maps serve time
ranges), the GPU and token samples' fingerprints per day (v18, `warehouse.sample_fingerprints`) and
the roll-ups', allocations' and queue samples' (v19).
A step that changes them changes this list too."""

MARKER_TABLE = "gpuledger_meta"
_V1_TABLES = frozenset(
    re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", STEPS[0].sql())
)
"""The tables of version 1, read from its frozen step: a file with exactly these and a
`schema_version` row 1 was written by a gpuledger from before the marker."""


def _names(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT internal AND NOT temporary "
        "UNION SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
    ).fetchall()
    return {str(name) for (name,) in rows}


def foreign_objects(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Tables and views of a file that is not gpuledger's (empty: new, or ours)."""
    names = _names(con)
    if not names:
        return []
    if MARKER_TABLE in names:
        marked = con.execute(
            f"SELECT count(*) FROM {MARKER_TABLE} WHERE key = 'application' AND value = 'gpuledger'"
        ).fetchall()
        return [] if marked[0][0] else sorted(names)
    if "schema_version" in names and names >= _V1_TABLES:
        first = con.execute("SELECT description FROM schema_version WHERE version = 1").fetchall()
        if first and first[0][0] == "initial schema":
            return []
    return sorted(names)


STORED_AS: dict[str, tuple[str, ...]] = {"gpu_samples": SAMPLE_LAYOUT_DDL}
"""Declared tables stored otherwise than as one table of their columns: `gpu_samples` is a view
over a series dimension and integer-keyed values (v8, `warehouse.sample_layout`)."""


def table_ddl(spec: TableSpec) -> str:
    """`CREATE TABLE IF NOT EXISTS` for one declared table: its columns with their types and
    `NOT NULL`s, and the primary key of a dimension (its key) or of an interval table (its key
    and `start_ts`)."""
    cols = [f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in spec.columns]
    if spec.key and spec.kind == "dimension":
        cols.append(f"PRIMARY KEY ({', '.join(spec.key)})")
    elif spec.key and spec.kind == "interval":
        cols.append(f"PRIMARY KEY ({', '.join((*spec.key, 'start_ts'))})")
    return f"CREATE TABLE IF NOT EXISTS {spec.name} (\n  " + ",\n  ".join(cols) + "\n)"


def declared_ddl() -> list[str]:
    """The DDL of the latest schema as the code declares it (not as the steps build it)."""
    out: list[str] = []
    for spec in TABLES.values():
        out.extend(STORED_AS.get(spec.name, (table_ddl(spec),)))
    return out + list(SUPPORT_DDL)


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchall()
    if not exists[0][0]:
        return 0
    rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0]) if rows[0][0] is not None else 0


def refuse_newer(version: int, path: str) -> None:
    """A file written by a newer gpuledger is never opened (for reading or writing) by an older
    one: migrating cannot help, upgrading can."""
    if version > LATEST:
        raise SchemaVersionError(
            f"{path}: warehouse schema version {version} is newer than this gpuledger supports "
            f"({LATEST}); upgrade gpuledger instead of opening it with an older one"
        )


def migrate(con: duckdb.DuckDBPyConnection, path: str) -> int:
    """Bring the file to `LATEST`; return the version it had before."""
    before = current_version(con)
    refuse_newer(before, path)
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
