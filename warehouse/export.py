"""Hive-partitioned Parquet export: the contract Spark, Trino or another DuckDB read.

Time-series tables are written as `DIR/<table>/year=YYYY/month=M/*.parquet` (partitioned on
their `ts`); the other tables as one `DIR/<table>/data.parquet`. The export goes to a
temporary folder beside `DIR` and is renamed into place table by table, so a reader never
sees half a table, and a crash leaves the previous export intact.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from gpuledger.core.frames import TABLES
from gpuledger.core.window import Window
from gpuledger.warehouse.store import Warehouse


@dataclass(frozen=True)
class ExportStats:
    tables: dict[str, int]
    out_dir: Path


def export_parquet(wh: Warehouse, out_dir: Path, window: Window | None = None) -> ExportStats:
    """Write every non-empty table; `window` limits time-series tables to `[start, end)`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for spec in TABLES.values():
        where, params = "", []
        if spec.kind == "timeseries" and window is not None:
            where, params = " WHERE ts >= ? AND ts < ?", [window.start, window.end]
        rows = int(wh.scalar(f"SELECT count(*) FROM {spec.name}{where}", params))
        if rows == 0:
            continue
        staging = out_dir / f".{spec.name}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        if spec.kind == "timeseries":
            select = (
                f"SELECT *, year(ts) AS year, month(ts) AS month FROM {spec.name}{where}"
            )
            wh.con.execute(
                f"COPY ({select}) TO '{_sql_path(staging)}' "
                "(FORMAT parquet, PARTITION_BY (year, month), OVERWRITE_OR_IGNORE)",
                params,
            )
        else:
            staging.mkdir(parents=True)
            wh.con.execute(
                f"COPY (SELECT * FROM {spec.name}{where}) TO '{_sql_path(staging / 'data.parquet')}' "
                "(FORMAT parquet)",
                params,
            )
        final = out_dir / spec.name
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        counts[spec.name] = rows
    return ExportStats(counts, out_dir)


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")
