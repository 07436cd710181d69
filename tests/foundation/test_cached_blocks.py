"""DuckDB's cached blocks handed back to the system by a one-pass reader (decision 0280).

Cases:
- `release_cached_blocks`: the table blocks a scan cached are gone from DuckDB's memory after
  it, the bound is the one set before, a result pending on the connection still reads whole,
  and rows written but not checkpointed are all still there (spilled, never lost);
- `Warehouse.reading_once`: within it, where DuckDB's bound is smaller than the warehouse
  file, a long read hands the blocks back; where the bound holds the file, and outside it, they
  stay cached (DuckDB's own behaviour, which the other readers keep)
(the day parts are files since decision 0281; `refresh-serving` itself: tests/dashboards/test_serving_cached_blocks.py).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse import store as store_module
from gpuledger.warehouse.connection import connect, release_cached_blocks

ROWS = 2_000_000
"""Random doubles: ~16 MB that compression cannot shrink, many blocks to cache."""
LIMIT = WarehouseSettings(memory_limit="256MiB")
LEFT = 2 * 2**20
"""What may stay cached after a release: DuckDB evicts down to the 1 MiB it is set to, and the
statement asking may load a block again."""


def cached_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """Bytes of table blocks DuckDB holds in memory for `con`'s database."""
    cursor = con.cursor()
    try:
        return int(cursor.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() "
                                  "WHERE tag = 'BASE_TABLE'").fetchall()[0][0])
    finally:
        cursor.close()


def _table(path: Path) -> None:
    con = connect(str(path), limits=LIMIT)
    con.execute(f"CREATE TABLE t AS SELECT range AS i, random() AS x FROM range({ROWS})")
    con.execute("CHECKPOINT")
    con.close()


def test_the_cached_blocks_go_and_the_bound_stays(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    _table(path)
    con = connect(str(path), limits=LIMIT)
    try:
        total = con.execute("SELECT sum(x) FROM t").fetchall()[0][0]
        assert cached_bytes(con) > 8 * 2**20  # the scan's blocks stay cached: DuckDB's own way
        pending = con.execute("SELECT i FROM t ORDER BY i")  # a result not fetched yet
        release_cached_blocks(con)
        assert cached_bytes(con) <= LEFT
        rows = pending.fetchall()  # `con` itself ran nothing meanwhile (a cursor did)
        assert len(rows) == ROWS and rows[-1] == (ROWS - 1,)
        assert con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0] == "256.0 MiB"
        con.execute(f"INSERT INTO t SELECT range + {ROWS}, 1.0 FROM range({ROWS})")  # not checkpointed
        release_cached_blocks(con)  # the written blocks are spilled, not dropped
        count, again = con.execute(f"SELECT count(*), sum(x) FILTER (WHERE i < {ROWS}) FROM t").fetchall()[0]
        assert count == 2 * ROWS and again == pytest.approx(total, rel=1e-12)
    finally:
        con.close()


def test_a_warehouse_reading_once_hands_back_after_a_long_read_where_the_bound_is_below_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "w.duckdb"
    _table(path)
    assert path.stat().st_size > 12 * 2**20
    monkeypatch.setattr(store_module, "LONG_READ_S", 0.0)  # every read counts as long
    for bound, handed_back in (("8MiB", True), ("256MiB", False)):
        con = connect(str(path), read_only=True, limits=WarehouseSettings(memory_limit=bound))
        wh = Warehouse(con, str(path), read_only=True)
        try:
            wh.scalar("SELECT sum(x) FROM t")
            assert cached_bytes(con) > 3 * LEFT  # outside the scope: cached as DuckDB does
            with wh.reading_once():
                assert wh.query("SELECT sum(x) AS s FROM t").height == 1
                assert (cached_bytes(con) <= LEFT) is handed_back, bound
            wh.scalar("SELECT sum(x) FROM t")
            assert cached_bytes(con) > 3 * LEFT  # the scope is over
        finally:
            wh.close()
