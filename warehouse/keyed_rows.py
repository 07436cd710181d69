"""Replacing one keyed row that carries a large BLOB (a day part, a stored result).

Why (docs/decisions/0270): DuckDB's `INSERT OR REPLACE` on a table with a primary key updates
the existing row in place, and an in-place update of a BLOB of megabytes is slow: 0.25 s for
the 8 MB of a 1,000-GPU month's allocation statistics, 0.03 s for a 2 MB day of serving
minutes, where a DELETE and an INSERT of the same row take 0.02-0.05 s and 0.005 s. The two
run in one transaction, so a reader or a kill sees the old row or the new, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import duckdb


def replace_row(con: duckdb.DuckDBPyConnection, table: str, key: Mapping[str, Any],
                values: Mapping[str, Any]) -> None:
    """Put the row `key` + `values` in `table` in place of the one with the same `key` (if
    any), as one transaction on `con` (which must not be in one already). `table` and the
    column names are the caller's constants, never user input."""
    columns = [*key, *values]
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(f"DELETE FROM {table} WHERE {' AND '.join(f'{c} = ?' for c in key)}", list(key.values()))
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [*key.values(), *values.values()])
        con.execute("COMMIT")
    except BaseException:
        with suppress(duckdb.Error):  # a connection that failed mid-way may have ended it already
            con.execute("ROLLBACK")
        raise
