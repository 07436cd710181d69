"""Bytes per raw sample row: which storage of `gpu_samples` gets under 15 B (issue 20).

Run: `python -m bench.bench_bytes [--gpus 1000] [--hours 8]`. The simulator's samples are
loaded one hour per batch (as `collect` and the demo load them) into a fresh DuckDB file per
layout; after a CHECKPOINT each file's blocks in use are divided by the rows, and DuckDB's
`pragma_storage_info` segments give the bytes of each column (a segment's size is the distance
to the next segment in its block; the last one in a block is counted to the block's end, so
per-column figures are upper bounds and the total is exact). Layouts, each adding one change:

1. `flat_as_simulated`: today's table, values as the simulator writes them (full doubles);
2. `flat_exporter`: values at the precision dcgm-exporter prints (`%f`: six decimals; power
   three, memory, temperature and utilisation whole numbers, as DCGM's integer fields are);
3. `flat_exporter_ts_order`: 2, rows ordered (ts, device) in each load;
4. `series_exporter`: the strings moved to a `gpu_series` dimension, samples keyed by an
   INTEGER `series_id`, ordered (ts, series_id), values as DOUBLE at exporter precision;
5. `series_typed`: 4 with DCGM's integer fields as INTEGER/SMALLINT columns;
6. `series_typed_series_order`: 5 ordered (series_id, ts) instead;
7. `series_typed_ratio_int`: 5 with the ratios stored as INTEGER millionths (what ALP finds);
8. `v008`: the warehouse's layout before v009 (4 ordered (series_id, ts), DOUBLE values);
9. `v008_ratios_float32`, `v008_ts_int_ms`, `v008_ts_int_s_and_ms`: lossless candidates (the
   ratios as FLOAT; `ts` as BIGINT epoch milliseconds; as epoch seconds plus a SMALLINT ms);
10. `v009`: 8 with the unread values at their coarser step (decision 0143, the load's own
   `sample_layout.stored_value`); `v009_typed`: 10 with the integer fields as SMALLINT/INTEGER.
Each layout records its columns' compression (`pragma_storage_info`).

Then the load time of the chosen layout (the warehouse's own `Warehouse.load`) against the
floor: a bare DuckDB `INSERT … SELECT` of the same Arrow frames into a table of today's flat DDL
(no transaction, no checks), in the same run, each going first in turn; and one hourly
`GROUP BY` read three ways (flat table, the `gpu_samples` view, by `series_id` then labels);
migration v008 of a v7 file and v009 of a v8 file holding the same samples (seconds, every
row kept); and the read an integer `ts` would cost: one hour's `GROUP BY` through a view whose
`ts` is computed from the integer (zone maps no longer skip) against the `ts` column itself.
Writes bench/results/bytes.json with machine facts.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from bench.common import write_result
from gpuledger.core.frames import METRIC_COLUMNS, TABLES
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse, migrations, sample_layout
from gpuledger.warehouse.schema import table_ddl
from tests.foundation.released_files import released_file

START = datetime(2026, 11, 2, tzinfo=UTC)
SERIES_COLS = ("node", "uuid", "gpu_i_id", "mig_profile", "vgpu", "namespace", "pod", "container")
RATIOS = ("gr_engine_active", "sm_active", "tensor_active", "dram_active")
WHOLE = ("gpu_util", "fb_used_mib", "fb_free_mib", "gpu_temp_c")
Batches = list[tuple[Window, pl.DataFrame]]


def exporter_precision(frame: pl.DataFrame) -> pl.DataFrame:
    """The values as a real collection stores them: dcgm-exporter prints a double field with
    `%f` (six decimals; DCGM reports power in mW, so three) and an integer field whole."""
    return frame.with_columns(
        [pl.col(c).round(6) for c in RATIOS]
        + [pl.col("power_w").round(3)]
        + [pl.col(c).round(0) for c in WHOLE]
    )


SERIES_DDL = (
    "CREATE TABLE gpu_series (series_id INTEGER NOT NULL, node VARCHAR NOT NULL, "
    "uuid VARCHAR NOT NULL, gpu_i_id INTEGER NOT NULL, mig_profile VARCHAR, vgpu VARCHAR, "
    "namespace VARCHAR, pod VARCHAR, container VARCHAR, PRIMARY KEY (series_id))"
)
_MATCH = " AND ".join(f"s.{c} IS NOT DISTINCT FROM v.{c}" for c in SERIES_COLS)
NEW_SERIES = (
    f"INSERT INTO gpu_series SELECT (SELECT coalesce(max(series_id), 0) FROM gpu_series) "
    f"+ row_number() OVER () AS series_id, * FROM (SELECT DISTINCT {', '.join(SERIES_COLS)} "
    f"FROM v) v WHERE NOT EXISTS (SELECT 1 FROM gpu_series s WHERE {_MATCH})"
)


def _values_ddl(opts: dict[str, Any]) -> str:
    ratio = {"int": "INTEGER", "f32": "FLOAT"}.get(opts.get("ratio", ""), "DOUBLE")
    types = {c: ratio for c in RATIOS} | {"power_w": "DOUBLE"}
    typed = opts.get("typed", False)
    types |= {c: ("INTEGER" if typed and c.startswith("fb") else
                  "SMALLINT" if typed else "DOUBLE") for c in WHOLE}
    ts = {"ms": "ts BIGINT NOT NULL", "s_ms": "ts BIGINT NOT NULL, ts_ms SMALLINT NOT NULL"}
    cols = ", ".join(f"{c} {types[c]}" for c in METRIC_COLUMNS)
    return (f"CREATE TABLE samples ({ts.get(opts.get('ts_int', ''), 'ts TIMESTAMPTZ NOT NULL')}, "
            f"series_id INTEGER NOT NULL, {cols})")


def _values_select(opts: dict[str, Any]) -> str:
    def value(c: str) -> str:
        if opts.get("ratio") == "int" and c in RATIOS:
            return f"CAST(round(v.{c} * 1e6) AS INTEGER)"
        return sample_layout.stored_value(f"v.{c}", c) if opts.get("coarse") else f"v.{c}"
    ts = {"ms": "epoch_ms(v.ts) AS ts",
          "s_ms": "epoch_ms(v.ts) // 1000 AS ts, CAST(epoch_ms(v.ts) % 1000 AS SMALLINT) AS ts_ms"}
    vals = ", ".join(value(c) for c in METRIC_COLUMNS)
    return (f"SELECT {ts.get(opts.get('ts_int', ''), 'v.ts')}, s.series_id, {vals} "
            f"FROM v JOIN gpu_series s ON {_MATCH}")


V008 = {"series": True, "order": "series_id, ts"}
LAYOUTS: dict[str, dict[str, Any]] = {
    "flat_as_simulated": {"exporter": False},
    "flat_exporter": {},
    "flat_exporter_ts_order": {"order": "ts, uuid, gpu_i_id, vgpu"},
    "series_exporter": {"series": True, "order": "ts, series_id"},
    "series_typed": {"series": True, "typed": True, "order": "ts, series_id"},
    "series_typed_series_order": {"series": True, "typed": True, "order": "series_id, ts"},
    "series_typed_ratio_int": {"series": True, "typed": True, "ratio": "int", "order": "ts, series_id"},
    "v008": V008,
    "v008_ratios_float32": V008 | {"ratio": "f32"},
    "v008_ts_int_ms": V008 | {"ts_int": "ms"},
    "v008_ts_int_s_and_ms": V008 | {"ts_int": "s_ms"},
    "v009": V008 | {"coarse": True},
    "v009_typed": V008 | {"coarse": True, "typed": True},
}


def build_layout(path: Path, batches: Batches, opts: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    series = opts.get("series", False)
    if series:
        con.execute(SERIES_DDL)
        con.execute(_values_ddl(opts))
    else:
        con.execute(table_ddl(TABLES["gpu_samples"]))
    order = f" ORDER BY {opts['order']}" if "order" in opts else ""
    select = _values_select(opts)
    for _, simulated in batches:
        frame = exporter_precision(simulated) if opts.get("exporter", True) else simulated
        con.register("v", frame.to_arrow())
        if series:
            con.execute(NEW_SERIES)
            con.execute(f"INSERT INTO samples SELECT * FROM ({select}){order}")
        else:
            con.execute(f"INSERT INTO gpu_samples SELECT * FROM v{order}")
        con.unregister("v")
    con.execute("CHECKPOINT")
    return con


def compressions(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """Each column's codecs as DuckDB chose them (validity masks left out)."""
    rows = con.sql(
        f"SELECT column_name, string_agg(DISTINCT compression, '+' ORDER BY compression) "
        f"FROM pragma_storage_info('{table}') WHERE segment_type <> 'VALIDITY' GROUP BY 1"
    ).fetchall()
    return {str(c): str(k) for c, k in rows}


def column_bytes(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, int]:
    """Bytes per column from the segments' places in their blocks (see module docstring)."""
    block = int(con.sql("SELECT block_size FROM pragma_database_size()").fetchall()[0][0])
    rows = con.sql(
        f"SELECT column_name, block_id, block_offset FROM pragma_storage_info('{table}') "
        "WHERE persistent AND block_id >= 0"
    ).fetchall()
    by_block: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for name, block_id, offset in rows:
        by_block[int(block_id)].append((int(offset), str(name)))
    # Other tables' segments share blocks too: count them as boundaries.
    out: dict[str, int] = defaultdict(int)
    for segments in by_block.values():
        segments.sort()
        for i, (offset, name) in enumerate(segments):
            end = segments[i + 1][0] if i + 1 < len(segments) else block
            out[name] += end - offset
    return dict(out)


def measure_layouts(tmp: Path, batches: Batches) -> dict[str, Any]:
    rows = sum(f.height for _, f in batches)
    out: dict[str, Any] = {}
    for name, opts in LAYOUTS.items():
        con = build_layout(tmp / f"{name}.duckdb", batches, opts)
        used = int(con.sql("SELECT used_blocks * block_size FROM pragma_database_size()").fetchall()[0][0])
        table = "samples" if opts.get("series") else "gpu_samples"
        cols = column_bytes(con, table)
        entry: dict[str, Any] = {
            "file_bytes_per_row": round(used / rows, 2),
            "column_bytes_per_row": {c: round(b / rows, 2) for c, b in cols.items()},
            "table_bytes_per_row": round(sum(cols.values()) / rows, 2),
            "compression": compressions(con, table),
        }
        if opts.get("series"):
            n = int(con.sql("SELECT count(*) FROM gpu_series").fetchall()[0][0])
            series_b = sum(column_bytes(con, "gpu_series").values())
            entry |= {"series": n, "series_bytes_per_row": round(series_b / rows, 2)}
        con.close()
        out[name] = entry
        print(name, entry["file_bytes_per_row"], entry["table_bytes_per_row"], flush=True)
    return out


Hourly = list[tuple[Window, dict[str, pl.DataFrame]]]


def simulate(gpus: int, hours: int) -> tuple[dict[str, pl.DataFrame], Hourly]:
    sim = Simulation(FleetSpec.default(gpus=gpus), Window(START, START + timedelta(hours=hours)), seed=7)
    return sim.inventory(), [(w, dict(f)) for w, f in sim.batches(timedelta(hours=1))]


def load_side_by_side(tmp: Path, inventory: dict[str, pl.DataFrame], batches: Hourly) -> dict[str, Any]:
    """`Warehouse.load` of each hour's gpu_samples against a bare insert of the same Arrow
    frame into today's flat DDL, each going first in turn; seconds summed."""
    floor = duckdb.connect(str(tmp / "floor.duckdb"))
    floor.execute(table_ddl(TABLES["gpu_samples"]))
    seconds = {"floor": 0.0, "ours": 0.0}
    cpu = {"floor": 0.0, "ours": 0.0}
    with Warehouse.open(tmp / "wh.duckdb") as wh:
        wh.load(LoadBatch(inventory))
        for i, (window, frames) in enumerate(batches):
            frame = frames["gpu_samples"]
            arrow = frame.to_arrow()
            for who in (("floor", "ours") if i % 2 else ("ours", "floor")):
                t, c = time.perf_counter(), time.process_time()
                if who == "ours":
                    wh.load(LoadBatch({"gpu_samples": frame}, window=window))
                else:
                    floor.register("v", arrow)
                    floor.execute("INSERT INTO gpu_samples SELECT * FROM v")
                    floor.unregister("v")
                seconds[who] += time.perf_counter() - t
                cpu[who] += time.process_time() - c
        wh.con.execute("CHECKPOINT")
        stored = wh.count("gpu_samples")
        used = int(wh.scalar("SELECT used_blocks * block_size FROM pragma_database_size()"))
    floor.close()
    rows = sum(f["gpu_samples"].height for _, f in batches)
    assert stored == rows, (stored, rows)
    return {"rows": rows, "seconds": {k: round(v, 2) for k, v in seconds.items()},
            "cpu_seconds": {k: round(v, 2) for k, v in cpu.items()},
            "ours_rows_per_s": round(rows / seconds["ours"]),
            "floor_rows_per_s": round(rows / seconds["floor"]),
            "ours_vs_floor_time": round(seconds["ours"] / seconds["floor"], 2),
            "warehouse_file_bytes_per_gpu_sample_row": round(used / rows, 1)}


FLAT_GROUP = """
SELECT date_trunc('hour', ts) AS hour, uuid, gpu_i_id, vgpu, namespace, pod,
    count(*) AS n, avg(gr_engine_active) AS act, max(fb_used_mib) AS fb
FROM {table} WHERE ts >= ? AND ts < ? GROUP BY ALL
"""
BY_SERIES_GROUP = """
WITH g AS (
    SELECT date_trunc('hour', ts) AS hour, series_id, count(*) AS n,
        avg(gr_engine_active) AS act, max(fb_used_mib) AS fb
    FROM gpu_sample_values WHERE ts >= ? AND ts < ? GROUP BY ALL
)
SELECT hour, uuid, gpu_i_id, vgpu, namespace, pod, sum(n) AS n,
    sum(act * n) / sum(n) AS act, max(fb) AS fb
FROM g JOIN gpu_series USING (series_id) GROUP BY ALL
"""


def reads_side_by_side(tmp: Path, window: Window, repeats: int = 3) -> dict[str, Any]:
    """One hourly GROUP BY over the day's samples three ways, best of `repeats`: on the flat
    table the floor's file holds (today's layout), through the `gpu_samples` view, and grouping
    the values by `series_id` first and joining the labels after (what a reader should do)."""
    flat = duckdb.connect(str(tmp / "floor.duckdb"), read_only=True)
    flat.execute("SET TimeZone = 'UTC'")
    best = {"flat_table": float("inf"), "view": float("inf"), "by_series_then_labels": float("inf")}
    counts: dict[str, int] = {}
    with Warehouse.open(tmp / "wh.duckdb", read_only=True) as wh:
        for _ in range(repeats):
            for name in list(best):
                params = [window.start, window.end]
                t = time.perf_counter()
                if name == "flat_table":
                    rows = flat.execute(FLAT_GROUP.format(table="gpu_samples"), params).fetchall()
                elif name == "view":
                    rows = wh.con.execute(FLAT_GROUP.format(table="gpu_samples"), params).fetchall()
                else:
                    rows = wh.con.execute(BY_SERIES_GROUP, params).fetchall()
                best[name] = min(best[name], time.perf_counter() - t)
                counts[name] = len(rows)
    flat.close()
    assert len(set(counts.values())) == 1, counts
    return {"groups": counts["view"], **{f"{k}_s": round(v, 3) for k, v in best.items()},
            "view_vs_flat": round(best["view"] / best["flat_table"], 2),
            "by_series_vs_flat": round(best["by_series_then_labels"] / best["flat_table"], 2)}


def migration(tmp: Path, batches: Hourly) -> dict[str, Any]:
    """Time v008 on a v7 file holding these samples (steps 1..7 from their frozen text), then
    v009 (`Warehouse.open`) on the v8 file it made, and check every row survives each: a
    checksum of each row's columns before and after (v009: the coarsened columns compared
    with DuckDB's `round` of the v8 values to the decimals of `STORED_DECIMALS`)."""
    path = tmp / "v7.duckdb"
    con = released_file(path, 7)
    names = TABLES["gpu_samples"].column_names
    cols = ", ".join(names)
    for _, frames in batches:
        con.register("v", exporter_precision(frames["gpu_samples"]).to_arrow())
        con.execute(f"INSERT INTO gpu_samples SELECT {cols} FROM v")
        con.unregister("v")
    con.execute("CHECKPOINT")
    checksum = f"SELECT sum(hash({cols})::HUGEINT), count(*) FROM gpu_samples"
    before = con.sql(checksum).fetchall()
    t = time.perf_counter()
    step8 = migrations.STEPS[7]
    con.execute("BEGIN TRANSACTION")
    con.execute(step8.sql())
    con.execute("INSERT INTO schema_version VALUES (?, ?, now())", [step8.version, step8.description])
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    seconds8 = time.perf_counter() - t
    after8 = con.sql(checksum).fetchall()
    coarse = ", ".join(sample_layout.stored_value(c, c) for c in names)
    expected9 = con.sql(f"SELECT sum(hash({coarse})::HUGEINT), count(*) FROM gpu_samples").fetchall()
    used8 = int(con.sql("SELECT used_blocks * block_size FROM pragma_database_size()").fetchall()[0][0])
    con.close()
    t, cpu = time.perf_counter(), time.process_time()
    with Warehouse.open(path) as wh:
        wh.con.execute("CHECKPOINT")
        seconds9, cpu9 = time.perf_counter() - t, time.process_time() - cpu
        after9 = wh.con.sql(checksum).fetchall()
        used9 = int(wh.scalar("SELECT used_blocks * block_size FROM pragma_database_size()"))
    rows = int(before[0][1])
    return {"rows": rows,
            "v7_to_v8": {"seconds": round(seconds8, 2), "every_row_kept": before == after8},
            "v8_to_v9": {"seconds": round(seconds9, 2), "cpu_seconds": round(cpu9, 2),
                         "rows_per_s": round(rows / seconds9),
                         "every_row_kept_or_at_its_step": after9 == expected9,
                         "file_bytes_per_row_before": round(used8 / rows, 2),
                         "file_bytes_per_row_after": round(used9 / rows, 2)}}


INT_TS_VIEW = ("CREATE VIEW timed AS SELECT {ts} AS ts, s.uuid, s.gpu_i_id, s.vgpu, s.namespace, "
               "s.pod, v.gr_engine_active, v.fb_used_mib FROM samples v JOIN gpu_series s USING (series_id)")


def int_ts_reads(tmp: Path, hours: int, repeats: int = 3) -> dict[str, Any]:
    """What an integer `ts` costs readers: one hour's GROUP BY (of `hours`) through a view of
    the v009 file (`ts` a column: zone maps skip the other hours) and of the `v008_ts_int_ms`
    file (`ts` computed from epoch ms: no skipping), best of `repeats`."""
    window = Window(START + timedelta(hours=hours // 2), START + timedelta(hours=hours // 2 + 1))
    best: dict[str, float] = {}
    counts: dict[str, int] = {}
    for name, ts in (("v009", "v.ts"), ("v008_ts_int_ms", "make_timestamptz(v.ts * 1000)")):
        con = duckdb.connect(str(tmp / f"{name}.duckdb"))
        con.execute("SET TimeZone = 'UTC'")
        con.execute(INT_TS_VIEW.format(ts=ts))
        best[name] = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            rows = con.execute(FLAT_GROUP.format(table="timed"), [window.start, window.end]).fetchall()
            best[name] = min(best[name], time.perf_counter() - t)
        counts[name] = len(rows)
        con.close()
    assert len(set(counts.values())) == 1, counts
    return {"hour_of": hours, "groups": counts["v009"],
            "ts_column_s": round(best["v009"], 4), "ts_from_int_s": round(best["v008_ts_int_ms"], 4),
            "int_vs_column": round(best["v008_ts_int_ms"] / best["v009"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=8)
    parser.add_argument("--skip-load", action="store_true")
    args = parser.parse_args()
    inventory, batches = simulate(args.gpus, args.hours)
    samples = [(w, f["gpu_samples"]) for w, f in batches]
    with tempfile.TemporaryDirectory() as tmp:
        result: dict[str, Any] = {"gpus": args.gpus, "hours": args.hours,
                                  "load_average": os.getloadavg()[0],
                                  "layouts": measure_layouts(Path(tmp), samples)}
        if not args.skip_load:
            result["load"] = load_side_by_side(Path(tmp), inventory, batches)
            result["migrations"] = migration(Path(tmp), batches)
            result["int_ts_reads"] = int_ts_reads(Path(tmp), args.hours)
            result["reads"] = reads_side_by_side(
                Path(tmp), Window(START, START + timedelta(hours=args.hours)))
        result["load_average_after"] = os.getloadavg()[0]
    write_result("bytes", result)
    print(result.get("load"))


if __name__ == "__main__":
    main()
