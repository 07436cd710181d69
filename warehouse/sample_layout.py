"""How raw GPU samples are stored: a series dimension and integer-keyed values (v008, 0128),
the unread profiling values at a coarser step (v009, 0143).

`gpu_samples` (the frame collectors and the simulator produce, declared in `core.frames`) is
not stored as one wide table. Its eight label columns repeat unchanged for every minute of a
device's series, so they live once per series in `gpu_series`; each sample row keeps only
`ts`, an INTEGER `series_id` and the nine values in `gpu_sample_values` (the split Prometheus
itself makes between series and samples). A view named `gpu_samples` joins them back into
today's columns, so every reader's SQL is unchanged.

Why these rules (bench/bench_bytes.py measures each):
1. Rows are written ordered (hour, series_id, ts) in every load: within an hour a series'
   samples sit together, so its memory columns are near-constant runs and `series_id` packs to
   a few bits; the hour first keeps each row group inside one hour, so DuckDB's zone maps on
   `ts` still skip every row group outside a time range (no index, decision 0070).
2. Series ids are assigned in SQL in the load's own transaction (an anti-join of the batch's
   distinct label tuples against `gpu_series`, numbered after the largest id): no Python loop
   per row, and a crash leaves neither the new series nor their samples.
3. Labels match with `IS NOT DISTINCT FROM` (NULL namespace/pod/vgpu is a value: an
   unattributed device, a whole card), so one label tuple is always one series.
4. `ts` stays a TIMESTAMPTZ column read directly by the view, so a reader's time filter is
   pushed into the scan of the values table (an expression over `ts` would not be: an integer
   `ts` would cost 1.5-3 B less per row but every time-filtered read through the view would
   scan the whole table, measured in bench_bytes, decision 0142).
5. The values no page, bill or report reads are stored at a coarser step (`STORED_DECIMALS`,
   decision 0143): `sm_active`, `tensor_active`, `dram_active` at 1 % and `power_w` at 0.1 W.
   Everything else (`gr_engine_active`, which idle detection compares to thresholds, memory,
   utilisation, temperature, labels, `ts`) is stored exactly as collected.
"""

from __future__ import annotations

import duckdb

from gpuledger.core.frames import GPU_SAMPLES, METRIC_COLUMNS
from gpuledger.core.window import Window
from gpuledger.warehouse.utc_sql import HOUR_US, utc_unit_number

SAMPLES_VIEW = GPU_SAMPLES.name
VALUES_TABLE = "gpu_sample_values"
SERIES_TABLE = "gpu_series"
SERIES_COLUMNS: tuple[str, ...] = (
    "node", "uuid", "gpu_i_id", "mig_profile", "vgpu", "namespace", "pod", "container",
)
"""The label columns of `gpu_samples` that name a series (every column but `ts` and values)."""
STORED_DECIMALS: dict[str, int] = {"sm_active": 2, "power_w": 1, "tensor_active": 2, "dram_active": 2}
"""Decimals each coarsened value is stored at (rule 5); migration v009 rounds stored rows the
same way (its frozen text repeats these numbers, a test compares them)."""

_TYPES = {c.name: c for c in GPU_SAMPLES.columns}
_MATCH = " AND ".join(f"s.{c} IS NOT DISTINCT FROM n.{c}" for c in SERIES_COLUMNS)
_ORDER = ", ".join(f"{c} NULLS FIRST" for c in SERIES_COLUMNS)


def _col(name: str) -> str:
    column = _TYPES[name]
    return f"{name} {column.type}{'' if column.nullable else ' NOT NULL'}"


SERIES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {SERIES_TABLE} (\n  series_id INTEGER NOT NULL,\n  "
    + ",\n  ".join(_col(c) for c in SERIES_COLUMNS)
    + ",\n  PRIMARY KEY (series_id)\n)"
)
VALUES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {VALUES_TABLE} (\n  ts TIMESTAMPTZ NOT NULL,\n"
    "  series_id INTEGER NOT NULL,\n  " + ",\n  ".join(_col(m) for m in METRIC_COLUMNS) + "\n)"
)
VIEW_DDL = (
    f"CREATE VIEW {SAMPLES_VIEW} AS SELECT v.ts, "
    + ", ".join(f"s.{c}" for c in SERIES_COLUMNS) + ", "
    + ", ".join(f"v.{m}" for m in METRIC_COLUMNS)
    + f" FROM {VALUES_TABLE} v JOIN {SERIES_TABLE} s ON s.series_id = v.series_id"
)
"""Today's `gpu_samples` columns, in their declared order (a test compares them)."""

DDL: tuple[str, ...] = (SERIES_DDL, VALUES_DDL, VIEW_DDL)
"""The stored shape of `gpu_samples` as the code declares it (`schema.declared_ddl`)."""


def new_series_sql(view: str) -> str:
    """Add the label tuples of `view` that `gpu_series` lacks, numbered after its largest id
    (in label order, so the same batches give the same ids)."""
    cols = ", ".join(SERIES_COLUMNS)
    return (
        f"INSERT INTO {SERIES_TABLE} (series_id, {cols}) "
        f"SELECT (SELECT coalesce(max(series_id), 0) FROM {SERIES_TABLE}) "
        f"+ row_number() OVER (ORDER BY {_ORDER}), {cols} "
        f"FROM (SELECT DISTINCT {cols} FROM {view}) n "
        f"WHERE NOT EXISTS (SELECT 1 FROM {SERIES_TABLE} s WHERE {_MATCH})"
    )


def stored_value(expr: str, metric: str) -> str:
    """The SQL that turns a collected value into the stored one (rule 5): DuckDB's `round`
    (half away from zero), so a load and migration v009 store the same number."""
    digits = STORED_DECIMALS.get(metric)
    return expr if digits is None else f"round({expr}, {digits})"


def insert_values_sql(view: str) -> str:
    """The batch's samples keyed by their series id, in the order of rule 1."""
    values = ", ".join(stored_value(f"n.{m}", m) for m in METRIC_COLUMNS)
    return (
        f"INSERT INTO {VALUES_TABLE} (ts, series_id, {', '.join(METRIC_COLUMNS)}) "
        f"SELECT n.ts, s.series_id, {values} FROM {view} n JOIN {SERIES_TABLE} s ON {_MATCH} "
        f"ORDER BY {utc_unit_number('n.ts', HOUR_US)}, s.series_id, n.ts"
    )


def write_samples(con: duckdb.DuckDBPyConnection, view: str, window: Window) -> int:
    """Replace the window's samples with the batch in `view` (inside the caller's
    transaction); returns how many stored rows the window held before."""
    deleted = con.execute(
        f"DELETE FROM {VALUES_TABLE} WHERE ts >= ? AND ts < ?", [window.start, window.end]
    ).fetchall()
    con.execute(new_series_sql(view))
    con.execute(insert_values_sql(view))
    return int(deleted[0][0]) if deleted else 0


def prune_series_sql() -> str:
    """Series no sample refers to any more (after retention removed their hours)."""
    return (
        f"DELETE FROM {SERIES_TABLE} s WHERE NOT EXISTS "
        f"(SELECT 1 FROM {VALUES_TABLE} v WHERE v.series_id = s.series_id)"
    )
