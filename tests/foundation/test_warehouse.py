"""The warehouse: migrations, idempotent loads, crash safety, one writer.

Cases:
- a new file is migrated to the latest version; an older file (fewer migrations applied) is
  migrated on open; a file from a newer gpuledger is refused with a clear message;
- loading the same window twice leaves the same rows (time-series replace by window);
  duplicates inside a batch are dropped (last wins); rows outside the window are refused;
- interval tables merge spans (earliest start, latest end); dimension tables replace by key;
- a load and its watermark commit together; a failing load changes nothing;
- `kill -9` in the middle of a load leaves the file exactly as before the load;
- a second writer process gets `WarehouseLockedError`;
- read-only opens refuse writes and refuse a missing file with a hint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpuledger.core.errors import InputError, SchemaVersionError, WarehouseError
from gpuledger.core.frames import METRIC_COLUMNS
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse, schema

DAY = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
REPO = Path(__file__).resolve().parents[2]


def samples(n: int, *, start: datetime = DAY.start, value: float = 0.5) -> pl.DataFrame:
    ts = [start + timedelta(minutes=i) for i in range(n)]
    return pl.DataFrame(
        {
            "ts": ts, "node": ["n1"] * n, "uuid": ["GPU-1"] * n, "gpu_i_id": [-1] * n,
            "mig_profile": [None] * n, "vgpu": [None] * n, "namespace": ["ns"] * n,
            "pod": ["p"] * n, "container": ["c"] * n,
            **{m: [value] * n for m in METRIC_COLUMNS},
        }
    )


@pytest.fixture
def wh(tmp_path: Path):
    with Warehouse.open(tmp_path / "w.duckdb") as w:
        yield w


def test_new_file_is_at_latest_version(wh: Warehouse):
    assert schema.current_version(wh.con) == schema.LATEST
    assert wh.count("gpu_samples") == 0


def test_older_file_is_migrated_and_newer_refused(tmp_path: Path, monkeypatch):
    path = tmp_path / "old.duckdb"
    with Warehouse.open(path):
        pass
    applied: list[str] = []

    def v_next(con: duckdb.DuckDBPyConnection) -> None:
        applied.append("next")
        con.execute("CREATE TABLE migration_probe (x INTEGER)")

    newer = (*schema.MIGRATIONS, (schema.LATEST + 1, "probe", v_next))
    monkeypatch.setattr(schema, "MIGRATIONS", newer)
    monkeypatch.setattr(schema, "LATEST", schema.LATEST + 1)
    from gpuledger.warehouse import store

    monkeypatch.setattr(store, "LATEST", schema.LATEST)
    with Warehouse.open(path) as w:
        assert applied == ["next"]
        assert schema.current_version(w.con) == schema.LATEST
        assert w.scalar("SELECT count(*) FROM migration_probe") == 0
    monkeypatch.undo()
    with pytest.raises(SchemaVersionError, match="newer than this gpuledger supports"):
        Warehouse.open(path)
    # read-only too: "open it for writing to migrate" would be the wrong advice for a newer file
    with pytest.raises(SchemaVersionError, match="newer than this gpuledger supports"):
        Warehouse.open(path, read_only=True)


def test_reloading_a_window_changes_nothing(wh: Warehouse):
    frame = samples(60)
    wh.load(LoadBatch({"gpu_samples": frame}, DAY))
    first = wh.query("SELECT * FROM gpu_samples ORDER BY ts")
    stats = wh.load(LoadBatch({"gpu_samples": frame}, DAY))
    assert stats.replaced["gpu_samples"] == 60
    assert wh.query("SELECT * FROM gpu_samples ORDER BY ts").equals(first)


def test_duplicates_in_a_batch_keep_the_last(wh: Warehouse):
    frame = pl.concat([samples(5, value=0.1), samples(5, value=0.9)])
    wh.load(LoadBatch({"gpu_samples": frame}, DAY))
    assert wh.count("gpu_samples") == 5
    assert wh.scalar("SELECT min(gr_engine_active) FROM gpu_samples") == 0.9


def test_rows_outside_the_window_are_refused(wh: Warehouse):
    late = samples(2, start=DAY.end)
    with pytest.raises(InputError, match="outside the load window"):
        wh.load(LoadBatch({"gpu_samples": late}, DAY))
    with pytest.raises(InputError, match="missing columns"):
        wh.load(LoadBatch({"gpu_samples": samples(1).drop("pod")}, DAY))


def test_intervals_merge_and_dimensions_replace(wh: Warehouse):
    def pod(start_h: int, end_h: int, node: str) -> pl.DataFrame:
        return pl.DataFrame({
            "namespace": ["ns"], "pod": ["p"], "node": [node], "queue": ["q"], "owner_kind": [None],
            "owner_name": [None], "gpu_requests": ['{"nvidia.com/gpu": 1}'], "labels": ["{}"],
            "start_ts": [DAY.start + timedelta(hours=start_h)],
            "end_ts": [DAY.start + timedelta(hours=end_h)],
        })

    wh.load(LoadBatch({"pods": pod(1, 3, "n1")}))
    wh.load(LoadBatch({"pods": pod(2, 5, "n2")}))
    row = wh.query("SELECT node, start_ts, end_ts FROM pods").row(0)
    assert row == ("n2", DAY.start + timedelta(hours=1), DAY.start + timedelta(hours=5))

    ns = pl.DataFrame({"namespace": ["a"], "team": ["t1"], "labels": ["{}"], "observed_at": [DAY.start]})
    wh.load(LoadBatch({"namespaces": ns}))
    wh.load(LoadBatch({"namespaces": ns.with_columns(team=pl.lit("t2"))}))
    assert wh.query("SELECT team FROM namespaces")["team"].to_list() == ["t2"]


def test_watermark_moves_with_the_load_and_a_failed_load_changes_nothing(wh: Warehouse):
    wh.load(LoadBatch({"gpu_samples": samples(10)}, DAY, {"prom": DAY.start + timedelta(minutes=10)}))
    assert wh.watermark("prom") == DAY.start + timedelta(minutes=10)
    bad_pods = pl.DataFrame({"namespace": [None], "pod": ["x"], "node": [None], "queue": [None],
                             "owner_kind": [None], "owner_name": [None], "gpu_requests": [None],
                             "labels": [None], "start_ts": [DAY.start], "end_ts": [DAY.end]})
    with pytest.raises(InputError, match="namespace has null"):
        wh.load(LoadBatch({"gpu_samples": samples(20), "pods": bad_pods}, DAY, {"prom": DAY.end}))
    assert wh.count("gpu_samples") == 10
    assert wh.watermark("prom") == DAY.start + timedelta(minutes=10)


_LOADER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    import polars as pl
    from datetime import UTC, datetime, timedelta
    from gpuledger.core.frames import METRIC_COLUMNS
    from gpuledger.core.window import Window
    from gpuledger.warehouse import LoadBatch, Warehouse
    import gpuledger.warehouse.store as store
    day = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    n = 1440 * 50
    ts = [day.start + timedelta(minutes=i % 1440) for i in range(n)]
    frame = pl.DataFrame({{
        "ts": ts, "node": ["n1"] * n, "uuid": [f"GPU-{{i // 1440}}" for i in range(n)],
        "gpu_i_id": [-1] * n, "mig_profile": [None] * n, "vgpu": [None] * n,
        "namespace": ["ns"] * n, "pod": ["p"] * n, "container": ["c"] * n,
        **{{m: [0.25] * n for m in METRIC_COLUMNS}},
    }})
    original = store.Warehouse._write
    def slow_write(self, spec, frame, window):
        removed = original(self, spec, frame, window)
        print("WROTE", flush=True)
        time.sleep(60)
        return removed
    store.Warehouse._write = slow_write
    with Warehouse.open({path!r}) as wh:
        wh.load(LoadBatch({{"gpu_samples": frame}}, day, {{"prom": day.end}}))
    """
)


def test_kill_during_a_load_leaves_the_file_as_before(tmp_path: Path):
    path = tmp_path / "crash.duckdb"
    with Warehouse.open(path) as w:
        w.load(LoadBatch({"gpu_samples": samples(30)}, DAY, {"prom": DAY.start}))
        before = w.query("SELECT * FROM gpu_samples ORDER BY ts")
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOADER.format(repo=str(REPO), path=str(path))],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "WROTE", "the loader should reach the middle of its transaction"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Warehouse.open(path) as w:
        assert w.query("SELECT * FROM gpu_samples ORDER BY ts").equals(before)
        assert w.watermark("prom") == DAY.start


def test_a_second_writer_is_refused(tmp_path: Path):
    path = tmp_path / "locked.duckdb"
    with Warehouse.open(path):
        code = f"import sys; sys.path.insert(0, {str(REPO)!r}); from gpuledger.warehouse import Warehouse; Warehouse.open({str(path)!r})"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "WarehouseLockedError" in result.stderr
    assert "one writer at a time" in result.stderr


def test_read_only_refuses_writes_and_missing_files(tmp_path: Path):
    with pytest.raises(WarehouseError, match="no warehouse here yet"):
        Warehouse.open(tmp_path / "missing.duckdb", read_only=True)
    path = tmp_path / "ro.duckdb"
    Warehouse.open(path).close()
    with Warehouse.open(path, read_only=True) as ro, pytest.raises(WarehouseError, match="read-only"):
        ro.load(LoadBatch({"gpu_samples": samples(1)}, DAY))


def test_audit_log_is_append_only_with_increasing_sequence(wh: Warehouse):
    a = wh.append_audit({"occurred_at": DAY.start, "actor": "alice", "action": "approve", "result": "ok"})
    b = wh.append_audit({"occurred_at": DAY.start, "actor": "bob", "action": "apply", "result": "ok"})
    assert b > a
    assert wh.query("SELECT actor FROM audit_log ORDER BY seq")["actor"].to_list() == ["alice", "bob"]
    _ = time


def test_interval_spans_after_a_gap_stay_apart(wh: Warehouse):
    """A MIG instance recreated after a reconfiguration is two spans, in one batch or two."""
    def inst(start_h: int, end_h: int, profile: str = "3g.40gb") -> dict:
        return {"uuid": "GPU-1", "gpu_i_id": 1, "profile": profile,
                "start_ts": DAY.start + timedelta(hours=start_h), "end_ts": DAY.start + timedelta(hours=end_h)}

    wh.load(LoadBatch({"mig_instances": pl.DataFrame([inst(0, 2), inst(5, 7)])}))
    wh.load(LoadBatch({"mig_instances": pl.DataFrame([inst(2, 3), inst(7, 9), inst(12, 13)])}))
    spans = wh.query("SELECT start_ts, end_ts FROM mig_instances ORDER BY start_ts").rows()
    hours = [(int((a - DAY.start).total_seconds() // 3600), int((b - DAY.start).total_seconds() // 3600)) for a, b in spans]
    assert hours == [(0, 3), (5, 9), (12, 13)]
    # reloading the same spans changes nothing
    wh.load(LoadBatch({"mig_instances": pl.DataFrame([inst(0, 2), inst(5, 7), inst(12, 13)])}))
    assert wh.query("SELECT start_ts, end_ts FROM mig_instances ORDER BY start_ts").rows() == spans
