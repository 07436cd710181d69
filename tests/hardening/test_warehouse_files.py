"""Hardening: the warehouse leaves foreign files alone, a failed load stores nothing, and a load
never rewrites history (issue 22, items 8 and 12).

Cases:
- another application's non-empty DuckDB file is refused by the library and by a writer
  command (one `gpuledger: error:` line), and is left exactly as it was (same tables, rows);
  an empty DuckDB file and gpuledger's own file open;
- a SQLite file given as the warehouse is refused as "not a DuckDB warehouse file" without
  any extension being installed or loaded; every connection has DuckDB's extension
  auto-install and auto-load turned off;
- a load whose second table fails (malformed JSON) raises `WarehouseError` naming the table and
  the cause, stores nothing of the batch (the inventory rows of its first table included), and
  the warehouse takes the next load;
- dimension loads merge first/last seen: an older or newer sighting of a card keeps the earliest
  `first_seen` and the latest `last_seen`, other columns take the new value;
- `simulate --load` of December into a warehouse holding November leaves November's bill as it
  was: its fleet cost equals cards x 720 h x unit price, computed here from the inventory and
  the price book, before and after.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.core.config import Settings
from gpuledger.core.errors import WarehouseError
from gpuledger.warehouse import LoadBatch, Warehouse

NOV1, DEC1, JAN1 = (datetime(2024, 11, 1, tzinfo=UTC), datetime(2024, 12, 1, tzinfo=UTC),
                    datetime(2025, 1, 1, tzinfo=UTC))


def _tables(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [t for (t,) in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {t: int(con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in names}
    finally:
        con.close()


def test_a_foreign_duckdb_file_is_refused_and_left_alone(tmp_path: Path, capsys):
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
    con.execute("INSERT INTO orders VALUES (1, 9.5), (2, 3.0)")
    con.close()
    with pytest.raises(WarehouseError, match=r"another application .*orders.*no gpuledger schema marker"):
        Warehouse.open(path)
    with pytest.raises(WarehouseError, match="another application"):
        Warehouse.open(path, read_only=True)
    code = main(["--warehouse", str(path), "report", "monthly", "--period", "2024-11", "--finalize",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("gpuledger: error: ")
    assert "Traceback" not in err[0]
    assert _tables(path) == {"orders": 2}


def test_an_empty_duckdb_file_and_our_own_file_open(tmp_path: Path):
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with Warehouse.open(empty) as wh:
        assert wh.query("SELECT value FROM gpuledger_meta WHERE key = 'application'").item() == "gpuledger"
    with Warehouse.open(empty) as wh, Warehouse.open(tmp_path / "other.duckdb"):
        assert wh.count("gpus") == 0


def test_a_sqlite_file_is_refused_without_touching_extensions(tmp_path: Path):
    path = tmp_path / "app.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(WarehouseError, match="not a DuckDB warehouse file"):
        Warehouse.open(path)
    assert path.read_bytes() == before
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        settings = wh.con.sql(
            "SELECT current_setting('autoinstall_known_extensions'), "
            "current_setting('autoload_known_extensions')"
        ).fetchall()
    assert settings == [(False, False)]


def _gpu(uuid: str, first: datetime, last: datetime, pool: str = "a") -> dict[str, object]:
    return {"uuid": uuid, "node": "n1", "gpu_index": 0, "model": "H100-80GB", "model_name": None,
            "memory_mib": 81559.0, "pool": pool, "sharing_mode": "exclusive", "replicas": None,
            "first_seen": first, "last_seen": last}


def test_a_load_that_fails_midway_stores_nothing(tmp_path: Path):
    gpus = pl.DataFrame([_gpu("GPU-1", NOV1, DEC1)])
    pods = pl.DataFrame({
        "namespace": ["ml"], "pod": ["p"], "node": ["n1"], "queue": [None], "owner_kind": [None],
        "owner_name": [None], "gpu_requests": ["{not json"], "labels": ["{}"],
        "start_ts": [NOV1], "end_ts": [DEC1],
    })
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        with pytest.raises(WarehouseError, match=r"load of pods failed, nothing of this batch was stored \(.*JSON"):
            wh.load(LoadBatch({"gpus": gpus, "pods": pods}, watermarks={"simulator": DEC1}))
        assert (wh.count("gpus"), wh.count("pods"), wh.watermark("simulator")) == (0, 0, None)
        wh.load(LoadBatch({"gpus": gpus}))
        assert wh.count("gpus") == 1


def test_dimension_loads_keep_the_earliest_first_seen_and_latest_last_seen(tmp_path: Path):
    mid = datetime(2024, 11, 15, tzinfo=UTC)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch({"gpus": pl.DataFrame([_gpu("GPU-1", NOV1, mid), _gpu("GPU-2", mid, DEC1)])}))
        # December's sighting of GPU-1 (new pool), and an older sighting of GPU-2.
        wh.load(LoadBatch({"gpus": pl.DataFrame([_gpu("GPU-1", DEC1, JAN1, pool="b"),
                                                 _gpu("GPU-2", NOV1, mid)])}))
        rows = wh.query("SELECT uuid, pool, first_seen, last_seen FROM gpus ORDER BY uuid").rows()
    assert rows == [("GPU-1", "b", NOV1, JAN1), ("GPU-2", "a", NOV1, DEC1)]


def _bill(path: Path, capsys) -> dict[str, object]:
    assert main(["--warehouse", str(path), "bill", "--period", "2024-11", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _simulate(path: Path, start: datetime, end: datetime, capsys) -> None:
    assert main(["--warehouse", str(path), "simulate", "--gpus", "8", "--step", "60s", "--load",
                 "--start", start.isoformat(), "--end", end.isoformat()]) == 0
    capsys.readouterr()


@pytest.mark.slow
def test_loading_another_month_never_rewrites_an_earlier_bill(tmp_path: Path, capsys):
    path = tmp_path / "w.duckdb"
    _simulate(path, NOV1, DEC1, capsys)
    with Warehouse.open(path, read_only=True) as wh:
        models = wh.query("SELECT model FROM gpus")["model"].to_list()
    prices = {p.model: p.unit_price for p in Settings().price_book}
    expected = round(sum(prices[m] for m in models) * 720, 2)   # every card, the whole month
    assert len(models) == 8
    assert _bill(path, capsys)["fleet_cost"] == pytest.approx(expected, abs=0.01)
    _simulate(path, DEC1, JAN1, capsys)                          # the next month, same fleet
    assert _bill(path, capsys)["fleet_cost"] == pytest.approx(expected, abs=0.01)
    with Warehouse.open(path, read_only=True) as wh:
        seen = wh.query("SELECT min(first_seen), max(last_seen) FROM gpus").row(0)
    assert seen[0] == NOV1 and seen[1] >= datetime(2024, 12, 31, 23, tzinfo=UTC)
