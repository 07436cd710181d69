"""`warehouse.keyed_rows.replace_row` (decision 0270): the row of a key is replaced whole, the
other keys' rows are untouched, and an INSERT that fails leaves the old row, not none."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpuledger.warehouse.keyed_rows import replace_row


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(tmp_path / "rows.duckdb"))
    con.execute("CREATE TABLE parts (name VARCHAR, day DATE, stamp VARCHAR, payload BLOB NOT NULL, "
                "PRIMARY KEY (name, day))")
    return con


def _rows(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    return con.execute("SELECT name, CAST(day AS VARCHAR), stamp, payload FROM parts ORDER BY ALL").fetchall()


def test_the_row_of_a_key_is_replaced_and_the_others_kept(con: duckdb.DuckDBPyConnection) -> None:
    big = bytes(range(256)) * 40_000  # 10 MB: the size that made INSERT OR REPLACE slow
    replace_row(con, "parts", {"name": "a", "day": "2026-10-01"}, {"stamp": "s1", "payload": b"old"})
    replace_row(con, "parts", {"name": "b", "day": "2026-10-01"}, {"stamp": "s1", "payload": b"other"})
    replace_row(con, "parts", {"name": "a", "day": "2026-10-01"}, {"stamp": "s2", "payload": big})
    assert _rows(con) == [("a", "2026-10-01", "s2", big), ("b", "2026-10-01", "s1", b"other")]


def test_a_failing_insert_keeps_the_old_row(con: duckdb.DuckDBPyConnection) -> None:
    replace_row(con, "parts", {"name": "a", "day": "2026-10-01"}, {"stamp": "s1", "payload": b"old"})
    with pytest.raises(duckdb.ConstraintException):
        replace_row(con, "parts", {"name": "a", "day": "2026-10-01"}, {"stamp": "s2", "payload": None})
    assert _rows(con) == [("a", "2026-10-01", "s1", b"old")]
    replace_row(con, "parts", {"name": "a", "day": "2026-10-01"}, {"stamp": "s3", "payload": b"new"})
    assert _rows(con) == [("a", "2026-10-01", "s3", b"new")]  # the connection is usable after
