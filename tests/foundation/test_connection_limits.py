"""Every DuckDB connection gpuledger opens is bounded (`warehouse.memory_limit`) and spills
where it is told (`warehouse.temp_directory`), docs/decisions/0221.

Cases:
- a warehouse opened with limits carries them: writer, its reader cursor, a read-only open, the
  serving store's reader (its own 0141 bound, the spill folder of the settings' rule);
- no limits given: the default share (50 %) of what DuckDB counts as available, checked against
  DuckDB's own default (80 % of it) read from a bare connection;
- the bound is real and the spill folder is used: an aggregate larger than the bound finishes
  (its sum checked by arithmetic) and its spill folder exists meanwhile; with spilling turned off
  the same query runs out of memory;
- the commands' `Context` opens the warehouse (writer and reader) with the settings' limits;
- one home: no product module outside `warehouse/connection.py` calls `duckdb.connect`;
- bad settings are one line naming the key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import pytest

from gpuledger.core.config import load_settings
from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.core.errors import ConfigError
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.connection import connect

ROOT = Path(__file__).resolve().parents[2]
_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    return str(con.sql(f"SELECT current_setting('{name}')").fetchall()[0][0])


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * _UNITS[unit]


def test_an_opened_warehouse_carries_its_limits(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    limits = WarehouseSettings(memory_limit="300MiB", temp_directory=str(tmp_path / "spill"))
    with Warehouse.open(path, limits=limits) as wh:
        assert _setting(wh.con, "memory_limit") == "300.0 MiB"
        assert _setting(wh.con, "temp_directory") == str(tmp_path / "spill")
        with wh.reader() as reader:  # a cursor of the same database: the same bounds
            assert _setting(reader.con, "memory_limit") == "300.0 MiB"
    with Warehouse.open(path, read_only=True, limits=WarehouseSettings(memory_limit="1GiB")) as wh:
        assert _setting(wh.con, "memory_limit") == "1.0 GiB"
        assert _setting(wh.con, "temp_directory") == f"{path}.tmp"  # beside the file by default


def test_the_default_is_half_of_what_duckdb_counts_as_available(tmp_path: Path) -> None:
    bare = duckdb.connect(":memory:")  # DuckDB's own default: 80 % of the available memory
    available = _bytes(_setting(bare, "memory_limit")) / 0.8
    bare.close()
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        ours = _bytes(_setting(wh.con, "memory_limit"))
    assert ours == pytest.approx(available * 0.5, rel=0.01)


def test_the_bound_holds_and_spills_go_to_the_folder(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    con = connect(":memory:", limits=WarehouseSettings(memory_limit="64MiB", temp_directory=str(spill)))
    con.execute("SET threads = 1")
    n, groups = 6_000_000, 3_000_000  # 3 M groups of two rows: far more state than 64 MiB
    query = f"SELECT count(*), sum(h) FROM (SELECT i % {groups} AS k, sum(i) AS h FROM range({n}) t(i) GROUP BY k)"
    assert con.sql(query).fetchall() == [(groups, n * (n - 1) // 2)]
    assert spill.is_dir()  # DuckDB spilled there (it removes the folder when the database closes)
    con.close()
    bounded = connect(":memory:", limits=WarehouseSettings(memory_limit="64MiB"))
    bounded.execute("SET threads = 1")
    bounded.execute("SET temp_directory = ''")  # no spilling: the same query cannot fit
    with pytest.raises(duckdb.OutOfMemoryException):
        bounded.sql(query).fetchall()
    bounded.close()


def test_the_serving_store_reader_keeps_its_own_bound(tmp_path: Path) -> None:
    from gpuledger.warehouse.serving_store import open_serving, reader_config

    store = tmp_path / "s.duckdb"
    duckdb.connect(str(store)).close()
    with open_serving(tmp_path / "w.duckdb", at=store) as wh:
        assert _setting(wh.con, "memory_limit") == reader_config(store)["memory_limit"].replace("MiB", ".0 MiB")
        assert _setting(wh.con, "temp_directory") == f"{store}.tmp"


def test_one_home_for_connections() -> None:
    opened = []
    for folder, _, files in os.walk(ROOT / "gpuledger", followlinks=True):  # roof + linked stages
        for name in (f for f in files if f.endswith(".py")):
            file = Path(folder) / name
            if re.search(r"\bduckdb\.connect\(", file.read_text()):
                opened.append(file.resolve().relative_to(ROOT).as_posix())
    assert opened == ["warehouse/connection.py"]


@pytest.mark.parametrize(("value", "said"), [
    ("lots", "expected a size like 2GiB"), ("0%", "more than 0%"), ("150%", "at most 100%"),
    ("0GiB", "above zero"),
])
def test_a_bad_limit_is_one_line(tmp_path: Path, value: str, said: str) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(f"warehouse:\n  memory_limit: '{value}'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    text = str(err.value)
    assert "warehouse.memory_limit" in text and said in text and "\n" not in text.strip()


def test_a_good_limit_is_kept_as_written(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text("warehouse:\n  memory_limit: 1500MB\n  temp_directory: /var/tmp/gl\n")
    settings = load_settings(config)
    assert (settings.warehouse.memory_limit, settings.warehouse.temp_directory) == ("1500MB", "/var/tmp/gl")


def test_the_commands_open_the_warehouse_with_the_settings_limits(tmp_path: Path) -> None:
    from gpuledger.command_context import Context
    from gpuledger.core.config import Settings

    settings = Settings(warehouse=WarehouseSettings(memory_limit="300MiB", temp_directory=str(tmp_path / "t")))
    ctx = Context(settings=settings, warehouse_path=tmp_path / "w.duckdb")
    with ctx.open_warehouse() as wh:
        assert (_setting(wh.con, "memory_limit"), _setting(wh.con, "temp_directory")) == ("300.0 MiB", str(tmp_path / "t"))
    with ctx.open_warehouse(read_only=True) as wh:
        assert _setting(wh.con, "memory_limit") == "300.0 MiB"


def test_a_spill_folder_nowhere_is_one_line(tmp_path: Path) -> None:
    from gpuledger.core.errors import WarehouseError

    nowhere = tmp_path / "missing" / "spill"
    with pytest.raises(WarehouseError) as err:
        Warehouse.open(tmp_path / "w.duckdb", limits=WarehouseSettings(temp_directory=str(nowhere)))
    assert "warehouse.temp_directory" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "w.duckdb").exists()  # refused before anything was opened
