"""The warehouse at fleet scale: load rate, roll-up, bytes per row, compaction, snapshot copy.

Run: `python -m bench.bench_warehouse [--gpus 1000] [--hours 24]`. Every figure has its floor
measured in the same run on the same data (the machine is shared; absolute times drift):

1. Load: the simulator's samples, one hour per batch, through `Warehouse.load(LoadBatch)`
   (idempotent replace of the window, one transaction per batch), against the floor: a bare
   DuckDB `INSERT … SELECT` of the same Arrow frames into a table of the same DDL with no
   index, no transaction and no checks. Also the path as it was before decision 0070 (the ART
   index on `ts`, the key-column `unique`, a `count(*)` before each delete) on the same data.
   Re-loading one hour checks idempotency (row counts unchanged).
2. Roll-up: the day's `card_hours_hourly` + `allocations` (`analytics.usage.rollup`), against the
   floor: one `GROUP BY` hour x device x holder over the same rows (what any hourly roll-up
   must at least read and aggregate), and against the roll-up before decision 0122 (the SQL
   sample pass, `bench.sampling_sql_before`), whose frames must equal ours row for row (the
   differential check), and main's roll-up (`--main-ref`) beside ours, each in a fresh
   process; a day and one hour, wall and CPU seconds (one line per way on stdout).
3. Bytes: file blocks in use per raw sample row and per GPU-month, raw and as roll-ups only
   (after `warehouse.retention.compact` removed the rolled-up raw hours).
4. Snapshot: copying the whole warehouse file, as the dashboard's snapshot does today.
Writes bench/results/warehouse.json with machine facts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from bench.common import peak_rss_mib, write_result
from bench.rollup_child import main_pass, main_ref_tree, say
from gpuledger.core.frames import METRIC_COLUMNS, TABLES
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.schema import table_ddl

START = datetime(2026, 11, 2, tzinfo=UTC)
SAMPLES = ("gpu_samples", "token_samples", "queue_samples")
Batches = list[tuple[Window, dict[str, pl.DataFrame]]]
MAIN_REF = "bc7f130"
"""main before decisions 0144/0145 (the series read, one parse per pod request): its roll-up is
measured beside ours in the same run."""


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
            self.con.execute(table_ddl(TABLES[name]))
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
        con.execute(table_ddl(TABLES["gpu_samples"]))
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


def _before_0122(wh: Warehouse, window: Window, settings: Any) -> dict[str, pl.DataFrame]:
    """`rollup.rollup_frames` as it was before decision 0122: the same consumers over the SQL
    pass (`bench.sampling_sql_before`, one statement for hourly + allocations, decision 0072)."""
    from bench.sampling_params import params
    from bench.sampling_sql_before import one_pass_sql
    from gpuledger.analytics.usage.hourly import hourly_usage
    from gpuledger.analytics.usage.rollup import allocations_frame
    from gpuledger.core.rules import Rules

    rules = Rules.of(settings)
    both = wh.query(one_pass_sql(), params(window, rules.sampling))
    ts = [pl.col(c).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for c in ("hour", "start_us", "end_us")]
    held = both.filter(pl.col("part") == "hourly").select(_HOURLY_OUT).with_columns(ts[0])
    held = held.rename({"hour": "ts"})
    runs = both.filter(pl.col("part") == "alloc").select(_ALLOC_OUT).with_columns(ts[1:])
    runs = runs.rename({"start_us": "start_ts", "end_us": "end_ts"}).sort(
        ["start_ts", "uuid", "gpu_i_id", "vgpu"], nulls_last=True)
    hourly = hourly_usage(wh, window, rules, held)
    allocations = allocations_frame(wh, window, rules, hourly, runs)
    return {"card_hours_hourly": hourly, "allocations": allocations}


_HOURLY_OUT = ("hour", "uuid", "gpu_i_id", "vgpu", "profile", "node", "namespace", "pod",
               "held_hours", "idle_hours", "held_idle_hours", "active_ratio", "fb_used_max_mib")
_ALLOC_OUT = ("uuid", "gpu_i_id", "vgpu", "profile", "node", "namespace", "pod", "start_us", "end_us")


def same_frames(ours: dict[str, pl.DataFrame], before: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """The differential check: every table's rows equal; floats other than the averaged
    `active_ratio` bit for bit, `active_ratio` within 1e-12 (each engine sums in its own order)."""
    from polars.testing import assert_frame_equal

    out: dict[str, Any] = {}
    for name, old in before.items():  # ours also holds the stamps (`rollup_hours`, `rule_sets`, 0147)
        frame = ours[name]
        keys = [c for c in ("ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod") if c in frame.columns]
        a, b = frame.sort(keys, nulls_last=True), old.sort(keys, nulls_last=True)
        exact = [c for c in a.columns if c != "active_ratio"]
        assert_frame_equal(a.select(exact), b.select(exact), check_exact=True)
        last_bits = 0
        if "active_ratio" in a.columns:
            assert_frame_equal(a.select("active_ratio"), b.select("active_ratio"), check_exact=False,
                               rel_tol=1e-12, abs_tol=0)
            last_bits = int((a["active_ratio"] != b["active_ratio"]).sum())
        out[name] = {"rows": a.height, "equal": True, "active_ratio_rows_off_in_last_bits": last_bits}
    return out


def _clock(fn: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def rollup(path: Path, window: Window, repeats: int = 2, main_tree: Path | None = None) -> dict[str, Any]:
    """The day's roll-up five ways in turn (`repeats` times, the fastest kept; wall and CPU
    seconds, CPU being the steadier figure on a shared machine): the floor (one GROUP BY over
    the same rows), the roll-up before 0122 (SQL pass), ours, and main's (the code of
    `main_tree`) and ours again each in a fresh child process; ours and before 0122 compared
    row for row, the children's row counts with ours;
    then one hour alone both ways (the cost of rolling up as an hour arrives)."""
    from gpuledger.analytics.usage.rollup import rollup_batch, rollup_frames
    from gpuledger.core.config import Settings
    from gpuledger.core.rules import HOLE_RULE_V1, Rules

    settings = Settings()
    ways = {
        "floor": lambda wh, w: wh.query(FLOOR_ROLLUP_SQL, [w.start, w.end]),
        "before_0122": lambda wh, w: _before_0122(wh, w, settings),
        "ours": lambda wh, w: rollup_frames(wh, w, Rules.of(settings)),
    }
    children = {"main": main_tree, "ours_fresh": Path(__file__).resolve().parent.parent} if main_tree else {}
    wall = {k: float("inf") for k in (*ways, *children)}
    cpu = dict(wall)
    results: dict[str, Any] = {}
    with Warehouse.open(path, read_only=True) as wh:
        for i in range(repeats):
            order = list(wall)[i % len(wall):] + list(wall)[:i % len(wall)]
            for name in order:
                if name in children:
                    results[name] = main_pass(children[name], path, window)
                    w_s, c_s = results[name]["wall"], results[name]["cpu"]
                else:
                    results[name], w_s, c_s = _clock(partial(ways[name], wh, window))
                wall[name], cpu[name] = min(wall[name], w_s), min(cpu[name], c_s)
        # The SQL pass is frozen at the hole rule of its day: compared under it (decision 0168).
        now = Rules.of(settings)
        v1 = replace(now, sampling=replace(now.sampling, hole_rule=HOLE_RULE_V1))
        same = same_frames(rollup_frames(wh, window, v1), results["before_0122"])
        if main_tree:
            ours_rows = {k: v.height for k, v in results["ours"].items()}
            for name in children:  # the tables both trees write (main's may lack the stamps, 0147)
                rows = results[name]["rows"]
                assert rows == {k: ours_rows[k] for k in rows}, (name, rows, ours_rows)
        middle = window.start + timedelta(hours=int(window.duration.total_seconds() // 7200))
        hour = Window(middle, middle + timedelta(hours=1))
        _, hour_s, hour_cpu = _clock(lambda: rollup_frames(wh, hour, Rules.of(settings)))
        hour_before, before_hour_s, before_hour_cpu = _clock(lambda: _before_0122(wh, hour, settings))
        same_hour = same_frames(rollup_frames(wh, hour, v1), hour_before)
    with Warehouse.open(path) as wh:
        t = time.perf_counter()
        stats = wh.load(rollup_batch(wh, window, settings))
        total_s = time.perf_counter() - t
    hours = int(window.duration.total_seconds() // 3600)
    return {"hours": hours, "seconds_best_of": repeats,
            **{f"{k}_s": round(v, 2) for k, v in wall.items()},
            **{f"{k}_cpu_s": round(v, 2) for k, v in cpu.items()},
            "ours_compute_and_load_s": round(total_s, 2),
            "speedup_vs_before_0122_wall": round(wall["before_0122"] / wall["ours"], 1),
            "speedup_vs_before_0122_cpu": round(cpu["before_0122"] / cpu["ours"], 1),
            "ours_vs_floor_wall": round(wall["ours"] / wall["floor"], 1),
            "ours_vs_floor_cpu": round(cpu["ours"] / cpu["floor"], 1),
            **({"main_tree": str(main_tree),
                "ours_fresh_vs_main_wall": round(wall["ours_fresh"] / wall["main"], 2),
                "ours_fresh_vs_main_cpu": round(cpu["ours_fresh"] / cpu["main"], 2),
                "ours_fresh_vs_floor_cpu": round(cpu["ours_fresh"] / cpu["floor"], 2)} if main_tree else {}),
            "one_hour_window": {"ours_s": round(hour_s, 2), "ours_cpu_s": round(hour_cpu, 2),
                                "before_0122_s": round(before_hour_s, 2),
                                "before_0122_cpu_s": round(before_hour_cpu, 2),
                                "ours_hour_vs_day_wall": round(hour_s / wall["ours"], 3),
                                "same_rows_as_before_0122": same_hour},
            "same_rows_as_before_0122": same, "rows": stats.rows,
            "floor_rows": results["floor"].height}


def bytes_and_compaction(path: Path, gpus: int, hours: int) -> dict[str, Any]:
    from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
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


def rollup_only(tmp: Path, args: argparse.Namespace, inventory: dict[str, pl.DataFrame],
                batches: Batches, sim_s: float) -> dict[str, Any]:
    """The roll-up figures alone, on the same simulated rows loaded by ours."""
    with Warehouse.open(tmp / "wh.duckdb") as wh:
        wh.load(LoadBatch(inventory))
        for window, frames in batches:
            wh.load(LoadBatch(frames, window=window))
    fleet = {"gpus": args.gpus, "hours": args.hours, "sample_rows": _rows(batches),
             "simulate_s": round(sim_s, 1)}
    del batches
    rolled = rollup(tmp / "wh.duckdb", Window(START, START + timedelta(hours=args.hours)),
                    main_tree=main_ref_tree(args))
    return {"fleet": fleet, "rollup": rolled, "peak_rss_mib": round(peak_rss_mib())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--rollup-only", action="store_true",
                        help="load with ours alone; only the roll-up (no load floor, bytes, snapshot)")
    parser.add_argument("--result", default="warehouse", help="results file name (bench/results/NAME.json)")
    parser.add_argument("--main-ref", default=MAIN_REF,
                        help="git ref whose roll-up is measured beside ours ('' for none)")
    parser.add_argument("--cache", default="/var/tmp/gpuledger-bench",
                        help="where the --main-ref tree is kept")
    args = parser.parse_args()
    inventory, batches, sim_s = simulate(args.gpus, args.hours)
    rows = _rows(batches)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        tmp = Path(d)
        if args.rollup_only:
            figures = rollup_only(tmp, args, inventory, batches, sim_s)
            write_result(args.result, {**figures, "load_average": _load(load_before)})
            say(figures["rollup"])
            return
        load = load_side_by_side(tmp, inventory, batches)
        gpu_sample_bytes = sample_bytes(tmp, batches)
        del batches
        file_bytes = (tmp / "wh.duckdb").stat().st_size
        t = time.perf_counter()
        shutil.copyfile(tmp / "wh.duckdb", tmp / "copy.duckdb")
        copy_s = time.perf_counter() - t
        rolled = rollup(tmp / "wh.duckdb", Window(START, START + timedelta(hours=args.hours)),
                        main_tree=main_ref_tree(args))
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
        "load_average": _load(load_before),
    }
    write_result(args.result, result)
    say(rolled)


def _load(at_start: tuple[float, float, float]) -> dict[str, list[float]]:
    """The machine's 1/5/15-minute load averages at the start and the end of the run."""
    return {"start": [round(x, 1) for x in at_start], "end": [round(x, 1) for x in os.getloadavg()]}


if __name__ == "__main__":
    main()
