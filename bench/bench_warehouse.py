"""The warehouse at fleet scale: load rate, roll-up, bytes per row, compaction, snapshot copy.

Run: `python -m bench.bench_warehouse [--gpus 1000] [--hours 24]`. Every figure has its floor
measured in the same run on the same data (the machine is shared; absolute times drift):

1. Load: the simulator's samples, one hour per batch, through `Warehouse.load(LoadBatch)`
   (idempotent replace of the window, one transaction per batch), against the floor: a bare
   DuckDB `INSERT … SELECT` of the same Arrow frames into a table of the same DDL with no
   index, no transaction and no checks. Also the path as it was before decision 0070 (the ART
   index on `ts`, the key-column `unique`, a `count(*)` before each delete) on the same data.
   Re-loading one hour checks idempotency (row counts unchanged).
2. Roll-up: the day's `card_hours_hourly` + `allocations` (`analytics.rollup`), against the
   floor: one `GROUP BY` hour x device x holder over the same rows (what any hourly roll-up
   must at least read and aggregate).
3. Bytes: file blocks in use per raw sample row and per GPU-month, raw and as roll-ups only
   (after `warehouse.retention.compact` removed the rolled-up raw hours).
4. Snapshot: copying the whole warehouse file, as the dashboard's snapshot does today.
Writes bench/results/warehouse.json with machine facts.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from bench.common import peak_rss_mib, write_result
from gpuledger.core.frames import METRIC_COLUMNS, TABLES
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse

START = datetime(2026, 11, 2, tzinfo=UTC)
SAMPLES = ("gpu_samples", "token_samples", "queue_samples")
Batches = list[tuple[Window, dict[str, pl.DataFrame]]]


def simulate(gpus: int, hours: int) -> tuple[dict[str, pl.DataFrame], Batches, float]:
    t = time.perf_counter()
    sim = Simulation(FleetSpec.default(gpus=gpus), Window(START, START + timedelta(hours=hours)), seed=7)
    inventory = sim.inventory()
    batches = [(w, dict(f)) for w, f in sim.batches(timedelta(hours=1))]
    return inventory, batches, time.perf_counter() - t


def _rows(batches: Batches) -> int:
    return sum(f.height for _, frames in batches for f in frames.values())


class _Bare:
    """The floor: the same Arrow frames inserted into tables of the same DDL, nothing else."""

    def __init__(self, path: Path, *, before_0070: bool = False) -> None:
        self.con = duckdb.connect(str(path))
        self.before = before_0070
        for name in SAMPLES:
            self.con.execute(TABLES[name].ddl())
        if before_0070:
            self.con.execute("CREATE INDEX gpu_samples_ts ON gpu_samples (ts)")

    def load(self, window: Window, frames: dict[str, pl.DataFrame]) -> None:
        if not self.before:
            for name, frame in frames.items():
                self.con.register("v", frame.to_arrow())
                self.con.execute(f"INSERT INTO {name} SELECT * FROM v")
                self.con.unregister("v")
            return
        # The load as it was: ART index on ts, key `unique` per batch, count(*) then DELETE.
        self.con.execute("BEGIN TRANSACTION")
        bounds = [window.start, window.end]
        for name, frame in frames.items():
            key = list(TABLES[name].key)
            self.con.register("v", frame.unique(subset=key, keep="last", maintain_order=True))
            self.con.execute(f"SELECT count(*) FROM {name} WHERE ts >= ? AND ts < ?", bounds).fetchall()
            self.con.execute(f"DELETE FROM {name} WHERE ts >= ? AND ts < ?", bounds)
            self.con.execute(f"INSERT INTO {name} SELECT * FROM v")
            self.con.unregister("v")
        self.con.execute("COMMIT")


def load_side_by_side(
    tmp: Path, inventory: dict[str, pl.DataFrame], batches: Batches
) -> dict[str, Any]:
    """Each hour is loaded by the floor, by ours and by the pre-0070 path in turn (rotating who
    goes first), so the machine's drifting load falls on all three alike; seconds are summed."""
    floor, before = _Bare(tmp / "floor.duckdb"), _Bare(tmp / "before.duckdb", before_0070=True)
    seconds = {"floor": 0.0, "ours": 0.0, "before": 0.0}
    with Warehouse.open(tmp / "wh.duckdb") as wh:
        wh.load(LoadBatch(inventory))
        paths = ("floor", "ours", "before")
        for i, (window, frames) in enumerate(batches):
            for path in paths[i % 3:] + paths[:i % 3]:  # each goes first in turn
                t = time.perf_counter()
                if path == "ours":
                    wh.load(LoadBatch(frames, window=window))
                else:
                    (floor if path == "floor" else before).load(window, frames)
                seconds[path] += time.perf_counter() - t
        counts = {n: wh.count(n) for n in SAMPLES}
        window, frames = batches[len(batches) // 2]
        again = wh.load(LoadBatch(frames, window=window))
        assert {n: wh.count(n) for n in SAMPLES} == counts, "re-load changed the row counts"
        assert again.replaced == {n: f.height for n, f in frames.items()}
    floor.con.close()
    before.con.close()
    rows = _rows(batches)
    rates = {f"{k}_rows_per_s": round(rows / v) for k, v in seconds.items()}
    return {"seconds": {k: round(v, 2) for k, v in seconds.items()}, **rates,
            "ours_vs_floor_time": round(seconds["ours"] / seconds["floor"], 2),
            "speedup_vs_before_0070": round(seconds["before"] / seconds["ours"], 2),
            "idempotent_reload_rows_replaced": sum(again.replaced.values())}


def sample_bytes(tmp: Path, batches: Batches) -> dict[str, Any]:
    """Bytes per `gpu_samples` row in a table of its own, as simulated (full double precision)
    and at dcgm-exporter's precision (it prints doubles with `%f`: six decimals), the precision
    a real collection stores."""
    out: dict[str, Any] = {}
    for label, digits in (("as_simulated", None), ("exporter_precision_6_decimals", 6)):
        con = duckdb.connect(str(tmp / f"bytes_{label}.duckdb"))
        con.execute(TABLES["gpu_samples"].ddl())
        rows = 0
        for _, frames in batches:
            frame = frames["gpu_samples"]
            if digits is not None:
                frame = frame.with_columns([pl.col(c).round(digits) for c in METRIC_COLUMNS])
            con.register("v", frame.to_arrow())
            con.execute("INSERT INTO gpu_samples SELECT * FROM v")
            con.unregister("v")
            rows += frame.height
        con.execute("CHECKPOINT")
        used = con.sql("SELECT used_blocks * block_size FROM pragma_database_size()").fetchall()[0][0]
        con.close()
        out[f"bytes_per_row_{label}"] = round(int(used) / rows, 1)
    return out


FLOOR_ROLLUP_SQL = """
SELECT date_trunc('hour', ts) AS hour, uuid, gpu_i_id, vgpu, namespace, pod,
    count(*) AS n, avg(gr_engine_active) AS act, max(fb_used_mib) AS fb
FROM gpu_samples WHERE ts >= ? AND ts < ? GROUP BY ALL
"""


def rollup(path: Path, window: Window, repeats: int = 2) -> dict[str, Any]:
    """The day's roll-up three ways in turn (`repeats` times, the fastest kept): the floor (one
    GROUP BY over the same rows), the two statements run one after the other (before 0072) and
    the one-pass statement; then one hour alone (the cost of rolling up as an hour arrives)."""
    from gpuledger.analytics.hourly import hourly_usage
    from gpuledger.analytics.rollup import allocations_frame, rollup_batch, rollup_frames
    from gpuledger.core.config import Settings

    settings = Settings()
    best = {"floor": float("inf"), "two_statements": float("inf"), "one_pass": float("inf")}
    with Warehouse.open(path) as wh:
        for _ in range(repeats):
            for name in list(best):
                t = time.perf_counter()
                if name == "floor":
                    floor_rows = wh.query(FLOOR_ROLLUP_SQL, [window.start, window.end]).height
                elif name == "two_statements":
                    hourly = hourly_usage(wh, window, settings)
                    allocations_frame(wh, window, settings, hourly)
                else:
                    rollup_frames(wh, window, settings)
                best[name] = min(best[name], time.perf_counter() - t)
        middle = window.start + timedelta(hours=int(window.duration.total_seconds() // 7200))
        hour = Window(middle, middle + timedelta(hours=1))
        t = time.perf_counter()
        rollup_frames(wh, hour, settings)
        hour_s = time.perf_counter() - t
        t = time.perf_counter()
        stats = wh.load(rollup_batch(wh, window, settings))
        total_s = time.perf_counter() - t
    return {"hours": int(window.duration.total_seconds() // 3600),
            "seconds_best_of": repeats, **{f"{k}_s": round(v, 2) for k, v in best.items()},
            "one_pass_compute_and_load_s": round(total_s, 2), "one_hour_window_s": round(hour_s, 2),
            "rows": stats.rows, "floor_rows": floor_rows,
            "speedup_vs_two_statements": round(best["two_statements"] / best["one_pass"], 2),
            "one_pass_vs_floor": round(best["one_pass"] / best["floor"], 1)}


def bytes_and_compaction(path: Path, gpus: int, hours: int) -> dict[str, Any]:
    from gpuledger.analytics.usage import ROLLUP_SOURCE
    from gpuledger.warehouse.retention import compact, used_bytes

    scale = 30 * 24 / hours / gpus  # per GPU-month
    with Warehouse.open(path) as wh:
        wh.con.execute("CHECKPOINT")
        raw_rows = wh.count("gpu_samples")
        raw_bytes = used_bytes(wh)
        t = time.perf_counter()
        stats = compact(wh, START + timedelta(hours=hours), margin=timedelta(0), rollup_source=ROLLUP_SOURCE)
        compact_s = time.perf_counter() - t
        rolled_bytes = used_bytes(wh)
        rollup_rows = wh.count("card_hours_hourly") + wh.count("allocations")
    return {
        "gpu_sample_rows": raw_rows, "used_bytes_raw": raw_bytes,
        "bytes_per_sample_row_all_tables": round(raw_bytes / raw_rows, 1),
        "mib_per_gpu_month_raw": round(raw_bytes * scale / 2**20, 3),
        "compact_s": round(compact_s, 2), "compact_removed_rows": stats.removed_rows,
        "used_bytes_after_compaction": rolled_bytes,
        "bytes_freed_per_removed_row": round((raw_bytes - rolled_bytes) / max(stats.removed_rows, 1), 1),
        "rollup_rows": rollup_rows,
        "mib_per_gpu_month_after_compaction": round(rolled_bytes * scale / 2**20, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--result", default="warehouse", help="results file name (bench/results/NAME.json)")
    args = parser.parse_args()
    inventory, batches, sim_s = simulate(args.gpus, args.hours)
    rows = _rows(batches)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        tmp = Path(d)
        load = load_side_by_side(tmp, inventory, batches)
        gpu_sample_bytes = sample_bytes(tmp, batches)
        del batches
        file_bytes = (tmp / "wh.duckdb").stat().st_size
        t = time.perf_counter()
        shutil.copyfile(tmp / "wh.duckdb", tmp / "copy.duckdb")
        copy_s = time.perf_counter() - t
        rolled = rollup(tmp / "wh.duckdb", Window(START, START + timedelta(hours=args.hours)))
        sizes = bytes_and_compaction(tmp / "wh.duckdb", args.gpus, args.hours)
    result = {
        "fleet": {"gpus": args.gpus, "hours": args.hours, "sample_rows": rows, "simulate_s": round(sim_s, 1)},
        "load": load,
        "rollup": rolled,
        "bytes": {**sizes, "gpu_samples_table_alone": gpu_sample_bytes},
        "snapshot_full_copy": {
            "file_mib": round(file_bytes / 2**20, 1), "copy_s": round(copy_s, 2),
            "mib_per_gpu_month": round(file_bytes * 30 * 24 / args.hours / args.gpus / 2**20, 3),
        },
        "peak_rss_mib": round(peak_rss_mib()),
    }
    write_result(args.result, result)


if __name__ == "__main__":
    main()
