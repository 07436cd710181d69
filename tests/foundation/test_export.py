"""`gpuledger export` writes hive-partitioned Parquet that DuckDB reads back unchanged.

Cases: samples spanning two months land in two `year=/month=` partitions whose row counts
match; dimension tables are one file; reading the export with `hive_partitioning` gives the
same rows as the warehouse; re-exporting replaces, never duplicates; the CLI reports counts.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from gpuledger.core.frames import METRIC_COLUMNS
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.export import export_parquet


def _samples(start: datetime, n: int) -> pl.DataFrame:
    return pl.DataFrame({
        "ts": [start + timedelta(hours=i) for i in range(n)], "node": ["n"] * n,
        "uuid": ["GPU-a"] * n, "gpu_i_id": [-1] * n, "mig_profile": [None] * n, "vgpu": [None] * n,
        "namespace": ["ns"] * n, "pod": ["p"] * n, "container": ["c"] * n,
        **{m: [float(i) for i in range(n)] for m in METRIC_COLUMNS},
    })


def test_export_is_partitioned_and_round_trips(tmp_path: Path):
    path = tmp_path / "w.duckdb"
    oct_end = datetime(2026, 11, 1, tzinfo=UTC)
    window = Window(oct_end - timedelta(hours=5), oct_end + timedelta(hours=3))
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"gpu_samples": _samples(window.start, 8)}, window))
        ns = pl.DataFrame({"namespace": ["ns"], "team": ["t"], "labels": ["{}"], "observed_at": [oct_end]})
        wh.load(LoadBatch({"namespaces": ns}))
        out = tmp_path / "export"
        export_parquet(wh, out)
        stats = export_parquet(wh, out)  # second export replaces the first
    assert stats.tables == {"gpu_samples": 8, "namespaces": 1, "namespace_history": 1}  # (0226)
    oct_files = list((out / "gpu_samples" / "year=2026" / "month=10").glob("*.parquet"))
    nov_files = list((out / "gpu_samples" / "year=2026" / "month=11").glob("*.parquet"))
    assert oct_files and nov_files
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    back = con.sql(
        f"SELECT month, count(*) AS n FROM read_parquet('{out}/gpu_samples/**/*.parquet', hive_partitioning=true) "
        "GROUP BY month ORDER BY month"
    ).fetchall()
    assert back == [(10, 5), (11, 3)]
    assert con.sql(f"SELECT team FROM '{out}/namespaces/data.parquet'").fetchall() == [("t",)]


def test_export_cli_reports_counts(tmp_path: Path):
    path = tmp_path / "w.duckdb"
    Warehouse.open(path).close()
    result = subprocess.run(
        [sys.executable, "-m", "gpuledger", "--warehouse", str(path), "export", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, check=True,
    )
    assert "exported to" in result.stdout
