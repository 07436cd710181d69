"""Sample values as stored since v9 (decisions 0142, 0143).

Cases:
- a ratio dcgm-exporter prints with `%f` (six decimals) round-trips exactly through the
  warehouse's DOUBLE column (ALP-compressed), through float32 and through an integer of
  millionths: checked for every one of the 1,000,001 six-decimal values in [0, 1] with numpy,
  the parse of the printed text checked on a sample with Python's own `float(f"{x:f}")`;
- a load stores `ts`, the labels, `gr_engine_active`, memory, utilisation and temperature
  exactly, and the four coarsened values within half a step of what was collected and on a
  whole step (independent arithmetic, not the layout's code);
- the frozen v009 text rounds exactly the columns `STORED_DECIMALS` names, to its decimals;
- a v8 file holding a simulated fleet at full exporter precision (loaded by the v8 path:
  migrations up to 8, no rounding) migrates in place: the same rows in the same stored order,
  every exact column identical, the coarsened ones at their step, and the raw-sample bill of
  the day identical to the cent, line by line;
- a failure later in the same migrating open rolls v009 back: the file stays v8, values intact.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.core.config import Settings
from gpuledger.core.frames import GPU_SAMPLES, METRIC_COLUMNS, TABLES, polars_schema
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse, migrations, sample_layout, schema, store

START = datetime(2026, 11, 1, tzinfo=UTC)
DAY = Window(START, START + timedelta(days=1))
COLS = GPU_SAMPLES.column_names
COARSE = {"sm_active": 2, "tensor_active": 2, "dram_active": 2, "power_w": 1}
"""What decision 0143 stores coarser, written out here (not read from the layout's code)."""
EXACT = [c for c in COLS if c not in COARSE]
BY = ("team", "model", "sharing_mode", "pool")
MONEY = [*BY, "list_cost", "sharing_discount", "cost", "idle_cost"]


def test_six_decimals_round_trip_through_double_float32_and_millionths(tmp_path: Path):
    k = np.arange(1_000_001, dtype=np.int64)
    printed = k / 1e6  # IEEE division is correctly rounded: the double nearest k / 10**6
    sample = np.random.default_rng(5).choice(k, 5_000, replace=False)
    assert all(float(f"{int(i) / 1e6:f}") == printed[i] for i in sample)  # what Prometheus parses
    assert (np.rint(printed * 1e6).astype(np.int64) == k).all()  # scaled integer
    as32 = printed.astype(np.float32).astype(np.float64)
    assert (np.rint(as32 * 1e6).astype(np.int64) == k).all()  # float32 (24-bit mantissa)
    assert not (as32 == printed).all()  # float32 is a different number, only the text survives
    con = duckdb.connect(str(tmp_path / "r.duckdb"))
    con.execute("CREATE TABLE r (k BIGINT, v DOUBLE)")
    con.register("f", pl.DataFrame({"k": k, "v": printed}).to_arrow())
    con.execute("INSERT INTO r SELECT * FROM f")
    con.execute("CHECKPOINT")
    back = con.sql("SELECT v FROM r ORDER BY k").fetchnumpy()["v"]
    codecs = {c for (c,) in con.sql("SELECT DISTINCT compression FROM pragma_storage_info('r') "
                                     "WHERE column_name = 'v' AND segment_type = 'DOUBLE'").fetchall()}
    con.close()
    assert (back == printed).all()
    assert codecs == {"ALP"}  # decimal doubles as integers of 10**-e: what a scaled int would give


def _random_samples(rows: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    devices = 7
    ts = [START + timedelta(seconds=60 * (i // devices), milliseconds=int(rng.integers(0, 999)))
          for i in range(rows)]
    cols: dict[str, Any] = {
        "ts": ts, "node": "n1", "uuid": [f"GPU-{i % devices}" for i in range(rows)],
        "gpu_i_id": -1, "mig_profile": None, "vgpu": None, "namespace": "ml", "pod": "p",
        "container": None,
    }
    for m in METRIC_COLUMNS:
        cols[m] = np.round(rng.random(rows), 6)
    cols["power_w"] = np.round(rng.random(rows) * 700, 3)
    for m in ("gpu_util", "fb_used_mib", "fb_free_mib", "gpu_temp_c"):
        cols[m] = np.floor(rng.random(rows) * 1000)
    frame = pl.DataFrame(cols).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    return frame.cast({"gpu_i_id": pl.Int32, **{c: pl.Utf8 for c in ("mig_profile", "vgpu", "container")}})


def _assert_coarse(collected: pl.DataFrame, stored: pl.DataFrame) -> None:
    """Exact columns equal; a coarsened value lies within half a step and on a whole step."""
    assert stored.select(EXACT).equals(collected.select(EXACT))
    for col, digits in COARSE.items():
        step = 10.0 ** -digits
        assert stored[col].is_null().equals(collected[col].is_null()), col
        got, was = stored[col].drop_nulls().to_numpy(), collected[col].drop_nulls().to_numpy()
        assert (np.abs(got - was) <= step / 2 + 1e-9).all(), col
        assert (np.abs(got / step - np.rint(got / step)) < 1e-6).all(), col
        assert (got != was).any(), col  # the data really had finer values


def test_a_load_stores_exact_columns_exactly_and_coarse_ones_on_their_step(tmp_path: Path):
    window = Window(START, START + timedelta(hours=1))
    collected = _random_samples(7 * 60, seed=1)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch({"gpu_samples": collected}, window=window))
        stored = wh.query(f"SELECT {', '.join(COLS)} FROM gpu_samples ORDER BY uuid, ts")
    _assert_coarse(collected.sort("uuid", "ts"), stored)


def test_the_frozen_step_rounds_what_the_layout_names():
    text = migrations.STEPS[8].sql()
    rounded = dict(re.findall(r"round\((\w+), (\d)\)", text))
    assert {c: int(d) for c, d in rounded.items()} == sample_layout.STORED_DECIMALS == COARSE


def _as_v8(monkeypatch: pytest.MonkeyPatch) -> None:
    """This code as the v8 release: migrations up to 8, samples stored unrounded."""
    v8 = schema.MIGRATIONS[:8]
    monkeypatch.setattr(schema, "MIGRATIONS", v8)
    monkeypatch.setattr(schema, "LATEST", 8)
    monkeypatch.setattr(store, "LATEST", 8)
    monkeypatch.setattr(sample_layout, "STORED_DECIMALS", {})
    monkeypatch.setattr(store, "kept_current", lambda *_: nullcontext())  # nor fingerprints (v018)
    # nor HAMi's allocations (v011): the v8 release read none
    from gpuledger.analytics.devices import vgpu
    from gpuledger.analytics.sampling import holders

    none = lambda *_: pl.DataFrame(schema=polars_schema(VGPU_ALLOCATIONS))  # noqa: E731
    for module in (vgpu, holders):
        monkeypatch.setattr(module, "vgpu_allocations_between", none)
    # nor node configuration over time (v014): `nodes` without `valid_from`, no `node_history`
    nodes = TABLES["nodes"]
    monkeypatch.setitem(TABLES, "nodes", replace(
        nodes, columns=tuple(c for c in nodes.columns if c.name != "valid_from")))
    monkeypatch.setattr(store, "extend_history", lambda *_: None)  # nor namespace_history (v015)
    from gpuledger.analytics.devices import replicas

    monkeypatch.setattr(replicas, "node_config_rows", lambda wh, *_: wh.query(  # one set per node
        "SELECT node, NULL::TIMESTAMPTZ AS valid_from, NULL::TIMESTAMPTZ AS valid_to, pool, "
        "CAST(labels AS VARCHAR) AS labels FROM nodes ORDER BY node"))
    from gpuledger.analytics.teams import namespaces as team_rows

    monkeypatch.setattr(team_rows, "namespace_history_rows", lambda wh: wh.query(  # one team each
        "SELECT namespace, NULL::TIMESTAMPTZ AS valid_from, team, CAST(labels AS VARCHAR) AS labels "
        "FROM namespaces"))


def _values(wh: Warehouse) -> pl.DataFrame:
    return wh.query(f"SELECT {', '.join(COLS)} FROM gpu_samples "
                    "ORDER BY ts, uuid, gpu_i_id, vgpu NULLS FIRST")


def _bills(wh: Warehouse) -> list[Bill]:
    return [compute_bill(wh, DAY, Settings(), by=BY, source=src) for src in ("raw", "auto")]


@pytest.fixture(scope="module")
def fleet() -> tuple[dict[str, pl.DataFrame], list[tuple[Window, dict[str, pl.DataFrame]]]]:
    sim = Simulation(FleetSpec.default(gpus=24), DAY, seed=11)
    inventory = sim.inventory()
    inventory.pop("mig_instances")
    inventory.pop("vgpu_allocations")  # v011: a v8 file has no such table
    return inventory, list(sim.batches(timedelta(hours=6)))


def _v8_file(path: Path, fleet: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, list[Bill], list[Any]]:
    inventory, batches = fleet
    _as_v8(monkeypatch)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=inventory))
        for chunk, frames in batches:
            wh.load(LoadBatch(frames=frames, window=chunk))
        assert schema.current_version(wh.con) == 8
        order = wh.query("SELECT ts, series_id FROM gpu_sample_values ORDER BY rowid").rows()
        before = (_values(wh), _bills(wh), order)
    monkeypatch.undo()
    return before


def test_a_v8_file_migrates_in_place_with_bills_to_the_cent(tmp_path: Path, fleet: Any, monkeypatch):
    path = tmp_path / "v8.duckdb"
    values, bills, order = _v8_file(path, fleet, monkeypatch)
    with Warehouse.open(path) as wh:
        assert schema.current_version(wh.con) == schema.LATEST >= 9
        assert wh.query("SELECT ts, series_id FROM gpu_sample_values ORDER BY rowid").rows() == order
        _assert_coarse(values, _values(wh))
        after = _bills(wh)
    for old, new in zip(bills, after, strict=True):
        assert new.fleet_cost == old.fleet_cost
        assert new.fleet_card_hours == pytest.approx(old.fleet_card_hours, abs=1e-9)
        assert new.lines.select(MONEY).rows() == old.lines.select(MONEY).rows()
        assert new.source == old.source


def test_a_failure_after_v009_leaves_the_v8_file_untouched(tmp_path: Path, fleet: Any, monkeypatch):
    path = tmp_path / "v8.duckdb"
    values, _, _ = _v8_file(path, fleet, monkeypatch)
    probe = schema.LATEST + 1
    failing = (probe, "probe step", schema.SqlMigration("ALTER TABLE no_such_table ADD COLUMN x INTEGER;"))
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, failing))
    monkeypatch.setattr(schema, "LATEST", probe)
    monkeypatch.setattr(store, "LATEST", probe)
    with pytest.raises(duckdb.CatalogException, match="no_such_table"):
        Warehouse.open(path)
    monkeypatch.undo()
    _as_v8(monkeypatch)
    with Warehouse.open(path, read_only=True) as ro:
        assert schema.current_version(ro.con) == 8
        assert _values(ro).equals(values)
