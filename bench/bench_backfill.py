"""Benchmark: `gpuledger collect --start --end` backfill of a field fleet from a real Prometheus,
loaded AND rolled up, beside its floors in the same run.

    nice python -m bench.bench_backfill [--gpus 1000] [--hours 4] [--effects none] [--chunk 1h]
        [--data DIR] [--before TREE] [--linearity] [--result NAME]

1. Prepare: the simulator's field fleet (`tests.field.harness`: `FleetSpec.default(gpus,
   field=effects)`), written as OpenMetrics one `--piece` at a time and backfilled into one
   Prometheus data directory with `promtool tsdb create-blocks-from openmetrics` (a piece at a
   time keeps the disk small: an hour of 1,000 GPUs is ~0.5-0.9 GB of text). A full month of
   1,000 GPUs is ~400 M samples: preparing it would take hours here, so `--hours` is what the
   machine allows in a few minutes, and the month is projected from the per-GPU-day rate.
2. Ours: a child process runs what `collect` runs (`collect_window` with `RollupPlan()`, the
   roll-up incremental as chunks arrive), recording its requests; its peak RSS (the child's
   `ru_maxrss`), rows, roll-up hours and seconds.
3. Floors, same run, same data: (a) Prometheus alone: the very requests replayed with the same
   concurrency, bodies read and discarded (`bench_collect.replay`); (b) the bare load: the
   stored `gpu_samples` rows inserted into a fresh DuckDB table from Arrow; (c) the roll-up
   alone: `pipeline.rollup` over the loaded window again (what rolling up after the load, the
   simulate/demo way, costs).
4. Memory vs window: the child again over a window `--mem-fraction` as long: peak RSS stays
   flat when it is bounded by the chunk, not the window.
5. `--before TREE` (e.g. `git archive <commit> | tar -x -C TREE`): the same child run on that
   tree's code, right after ours, on the same data ("before" in the same run).
6. `--linearity`: the first half of the window and all of it, alternated twice: the marginal
   seconds per hour and the month from them (fixed costs of a run are not spread over it).
`--data DIR` keeps the prepared Prometheus data in DIR and reuses it when DIR already holds the
same fleet and window (preparing 1,000 GPUs x 6 h takes minutes). Every child reports its CPU
seconds (user + system, all threads) beside its wall seconds: on a shared machine they move
far less with the load. Writes bench/results/backfill.json (machine facts, load average).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.bench_collect import replay
from bench.common import write_result
from gpuledger.core.window import Window

START = datetime(2026, 11, 1, 22, tzinfo=UTC)
"""Two hours before a UTC midnight: the first (partial) day is rolled up during the run."""
MONTH_GPU_DAYS = 1000 * 30
QUIET_FLOORS_S = 2.19
"""The floors of the quiet run (bulk reads 1.42 s + bare load 0.27 + roll-up alone 0.50, 1,000
GPUs x 6 h = 250 GPU-days, bench/results/backfill.json at commit f2c241d): the ratio measured on a loaded
machine, times these, estimates the quiet figure."""


class _Piece:
    """The simulation seen through one sub-window (what `write_openmetrics` renders)."""

    def __init__(self, sim: Any, window: Window) -> None:
        self._sim = sim
        self.window = window

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)


def prepare(root: Path, gpus: int, window: Window, effects_name: str, piece: timedelta) -> dict[str, Any]:
    """Simulate, write each piece, promtool it into `root/prometheus-data`, delete the text."""
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.simulator.openmetrics import write_openmetrics
    from tests.field.harness import FAMILIES, effects
    from tools.metrics_servers import backfill

    sim = Simulation(FleetSpec.default(gpus=gpus, field=effects(effects_name)), window, seed=7)
    samples, text_bytes, write_s, promtool_s = 0, 0, 0.0, 0.0
    for sub in window.split(piece):
        path = root / "piece.om"
        started = time.perf_counter()
        counts = write_openmetrics(_Piece(sim, sub), path, families=FAMILIES)
        write_s += time.perf_counter() - started
        samples += sum(counts.values())
        text_bytes += path.stat().st_size
        started = time.perf_counter()
        backfill(path, root / "prometheus-data")
        promtool_s += time.perf_counter() - started
        path.unlink()
        print(f"prepared {sub}: {samples:,} samples so far", flush=True)
    return {"samples": samples, "openmetrics_mb": round(text_bytes / 1e6, 1),
            "write_s": round(write_s, 1), "promtool_s": round(promtool_s, 1), "gpus": sim.gpu_count}


CHILD = """
import json, pickle, resource, sys, time
from datetime import datetime, timedelta
from pathlib import Path
from gpuledger.collect_pipeline import collect_window
from gpuledger.collect_rollup import RollupPlan
from gpuledger.collectors.prometheus import PrometheusCollector
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
url, path, start, end, chunk, conc, log_path, read_path = sys.argv[1:9]
settings = Settings(prometheus={"chunk": chunk, "max_concurrency": int(conc), "read_path": read_path})
window = Window(datetime.fromisoformat(start), datetime.fromisoformat(end))
now = lambda: window.end + timedelta(hours=1)
collector = PrometheusCollector(url, settings, now=now, namespaces_from_metrics=True)
started = time.perf_counter()  # the read-path probes are timed, but left out of the replayed log
cpu_started = resource.getrusage(resource.RUSAGE_SELF)
collector.choose_read_path()
collector.http.log = []
with Warehouse.open(path) as wh:
    r = collect_window(wh, settings, url, window, collector=collector, now=now, rollup=RollupPlan())
    rows = wh.count("gpu_samples")
seconds = time.perf_counter() - started
cpu = resource.getrusage(resource.RUSAGE_SELF)
cpu_s = cpu.ru_utime + cpu.ru_stime - cpu_started.ru_utime - cpu_started.ru_stime
collector.close()
if log_path != "-":
    Path(log_path).write_bytes(pickle.dumps(collector.http.log))  # remote-read bodies are bytes
print(json.dumps({"seconds": seconds, "cpu_s": round(cpu_s, 2), "gpu_sample_rows": rows, "chunks": r.chunks,
    "queries": r.queries, "response_mb": round(r.bytes / 1e6, 1), "rollup_hours": r.rollup_hours,
    "rollup_rows": r.rollup_rows, "rollup_s": round(r.rollup_seconds, 2),
    "rolled_to": r.rolled_to.isoformat() if r.rolled_to else None,
    "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


STAGES = """
import json, sys, time
from datetime import datetime, timedelta
from gpuledger.collectors.bulk_align import align
from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.dcgm import fetch_labels
from gpuledger.collectors.prometheus import PrometheusCollector
from gpuledger.core.config import Settings
from gpuledger.core.frames import DCGM_FIELDS
from gpuledger.core.window import Window
url, start, end = sys.argv[1:4]
chunk = Chunk(Window(datetime.fromisoformat(start), datetime.fromisoformat(end)))
collector = PrometheusCollector(url, Settings(prometheus={"read_path": "remote_read"}))
collector.choose_read_path()
bulk, metrics, labels = collector._bulk, list(DCGM_FIELDS), fetch_labels()
bodies = [bulk.fetch(chunk, shard, metrics) for shard in collector.shards(chunk.window, chunk.points)]
for body, what in bodies:  # warm: the reader has seen these series (the chunk before)
    bulk.parse(body, metrics, what)
runs = []
for _ in range(5):
    started = time.process_time()
    for body, what in bodies:
        align(bulk.parse(body, metrics, what), chunk, len(metrics), labels, left_open=bulk.left_open)
    runs.append(time.process_time() - started)
collector.close()
print(json.dumps({"cpu_s_best": round(min(runs), 3), "cpu_s_median": round(sorted(runs)[2], 3),
                  "answers": len(bodies), "response_mb": round(sum(len(b) for b, _ in bodies) / 1e6, 1)}))
"""


def stage_cpu(url: str, window: Window, tree: Path | None) -> dict[str, Any]:
    """CPU seconds of the remote-read answers' decoding and alignment alone, for one 2-hour
    read of the window (answers fetched once, then parsed and aligned five times in one
    thread: what the load of the machine and the engine move least), on `tree`'s code."""
    end = min(window.end, window.start + timedelta(hours=4))
    chunk_window = Window(max(window.start, end - timedelta(hours=2)), end)
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    done = subprocess.run(
        [sys.executable, "-c", STAGES, url, chunk_window.start.isoformat(), chunk_window.end.isoformat()],
        capture_output=True, text=True, check=False, env=env, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"stage child failed: {done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "read": str(chunk_window)}


def linearity(url: str, window: Window, chunk: str, concurrency: int, tmp: Path) -> dict[str, Any]:
    """The backfill of the first half of the window and of all of it, alternated twice (same
    load for both): the marginal seconds per hour, and the month from it, beside the month at
    the whole window's per-GPU-day rate (which also spreads the run's fixed costs)."""
    half = Window(window.start, window.start + (window.end - window.start) / 2)
    runs = []
    for i, part in enumerate((half, window, half, window)):
        r = run_child(url, tmp / f"linear-{i}.duckdb", part, chunk=chunk, concurrency=concurrency, log=None)
        runs.append({"hours": (part.end - part.start).total_seconds() / 3600, "load": os.getloadavg()[0],
                     **{k: r[k] for k in ("seconds", "cpu_s", "gpu_sample_rows", "peak_rss_mib")}})
    pairs = [(runs[0], runs[1]), (runs[2], runs[3])]
    marginal = [(b["seconds"] - a["seconds"]) / (b["hours"] - a["hours"]) for a, b in pairs]
    return {"runs": runs, "marginal_s_per_hour": [round(m, 3) for m in marginal],
            "month_from_marginal_s": [round(a["seconds"] + m * (720 - a["hours"])) for (a, _), m
                                      in zip(pairs, marginal, strict=True)],
            "note": "per pair: the half window's seconds plus the marginal rate over the rest of a "
                    "30-day month (the fleet of this run)"}


def run_child(url: str, warehouse: Path, window: Window, *, chunk: str, concurrency: int,
              log: Path | None, read_path: str = "auto", tree: Path | None = None) -> dict[str, Any]:
    """The backfill in a fresh process (so its peak RSS is its own), reading by `read_path`
    (`prometheus.read_path`: `auto` takes the engine's bulk read, decision 0124), on the code
    of `tree` when given (else this tree's; run in `tree`, since `python -c` puts the working
    folder first on the import path)."""
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(warehouse), window.start.isoformat(),
         window.end.isoformat(), chunk, str(concurrency), str(log) if log else "-", read_path],
        capture_output=True, text=True, check=False, env=env, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"backfill child failed: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _log(path: Path) -> list[tuple[str, Any]]:
    """A child's recorded requests (path, form or remote-read body)."""
    return [tuple(item) for item in pickle.loads(path.read_bytes())]


def bare_load(warehouse: Path) -> dict[str, Any]:
    """Floor (b): the stored rows, as Arrow, into a fresh DuckDB table (no checks, one INSERT)."""
    import duckdb

    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        table = wh.query("SELECT * FROM gpu_samples").to_arrow()  # a view over series + values (v008)
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp, duckdb.connect(f"{tmp}/b.duckdb") as con:
        con.register("arrow_rows", table)
        con.execute("CREATE TABLE gpu_samples AS SELECT * FROM arrow_rows LIMIT 0")
        started = time.perf_counter()
        con.execute("INSERT INTO gpu_samples SELECT * FROM arrow_rows")
        seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "rows": table.num_rows,
            "rows_per_s": round(table.num_rows / seconds)}


def rollup_alone(warehouse: Path, window: Window) -> dict[str, Any]:
    """Floor (c): the roll-up of the whole window once the samples are in (`pipeline.rollup`)."""
    from gpuledger.core.config import Settings
    from gpuledger.pipeline import rollup
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse) as wh:
        started = time.perf_counter()
        rows = rollup(wh, window, Settings(), label="roll-up (floor)")
        return {"seconds": round(time.perf_counter() - started, 2), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=4)
    parser.add_argument("--effects", default="none", help="field effects: none, all, or one name")
    parser.add_argument("--chunk", default="1h", help="prometheus.chunk for the backfill")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--piece", default="1h", help="OpenMetrics text written per promtool run")
    parser.add_argument("--mem-fraction", type=float, default=0.25)
    parser.add_argument("--data", type=Path, help="keep (and reuse) the prepared Prometheus data here")
    parser.add_argument("--before", type=Path, help="a tree of older code, run the same way after ours")
    parser.add_argument("--result", default="backfill", help="bench/results/<RESULT>.json")
    parser.add_argument("--linearity", action="store_true",
                        help="also time half the window and all of it, alternated (marginal rate)")
    args = parser.parse_args(argv)
    from gpuledger.core.window import parse_duration
    from tools.metrics_servers import start_prometheus

    window = Window(START, START + timedelta(hours=args.hours))
    short = Window(START, START + timedelta(hours=max(1.0, args.hours * args.mem_fraction)))
    with tempfile.TemporaryDirectory(prefix="bench-backfill-") as tmp:
        root = Path(tmp)
        prepared = _prepared(args, window, parse_duration(args.piece), root)
        server = start_prometheus(args.data or root)
        try:
            ours = run_child(server.url, root / "w.duckdb", window, chunk=args.chunk,
                             concurrency=args.concurrency, log=root / "bulk.log")
            print(f"ours: {ours}", flush=True)
            by_query = run_child(server.url, root / "q.duckdb", window, chunk=args.chunk,
                                 concurrency=args.concurrency, log=root / "query.log",
                                 read_path="query_range")
            print(f"ours, query_range path: {by_query}", flush=True)
            prom_s, prom_bytes = replay(server.url, _log(root / "query.log"), args.concurrency)
            print(f"prometheus alone (query_range): {prom_s:.1f}s", flush=True)
            bulk_s, _ = replay(server.url, _log(root / "bulk.log"), args.concurrency)
            print(f"prometheus alone (the bulk path's reads): {bulk_s:.1f}s", flush=True)
            short_run = run_child(server.url, root / "short.duckdb", short, chunk=args.chunk,
                                  concurrency=args.concurrency, log=None)
            before, stages, linear = _beside(server.url, window, args, root)
        finally:
            server.stop()
        bare = bare_load(root / "w.duckdb")
        floor_rollup = rollup_alone(root / "w.duckdb", window)
    write_result(args.result, _figures(args, window, {
        "prepared": prepared, "ours": ours, "query_path": by_query, "bulk_s": bulk_s,
        "prom_s": prom_s, "prom_bytes": prom_bytes, "bare": bare,
        "floor_rollup": floor_rollup, "short_run": short_run, "before": before,
        "stages": stages, "linear": linear,
        "short_hours": (short.end - short.start).total_seconds() / 3600}))
    return 0


def _beside(url: str, window: Window, args: argparse.Namespace, root: Path,
            ) -> tuple[dict[str, Any] | None, dict[str, Any], dict[str, Any] | None]:
    """The runs beside ours: the older tree (`--before`), the decode + align stage, `--linearity`."""
    before = None if args.before is None else run_child(
        url, root / "before.duckdb", window, chunk=args.chunk, concurrency=args.concurrency, log=None,
        tree=args.before)
    if before is not None:
        print(f"before ({args.before}): {before}", flush=True)
    stages = {"ours": stage_cpu(url, window, None)}
    if args.before is not None:
        stages["before"] = stage_cpu(url, window, args.before)
    print(f"decode + align alone: {stages}", flush=True)
    linear = linearity(url, window, args.chunk, args.concurrency, root) if args.linearity else None
    if linear is not None:
        print(f"linearity: {linear}", flush=True)
    return before, stages, linear


def _prepared(args: argparse.Namespace, window: Window, piece: timedelta, tmp: Path) -> dict[str, Any]:
    """Prepare the data into `--data` (or `tmp`), or reuse `--data` when it holds this fleet."""
    root = args.data or tmp
    marker = root / "prepared.json"
    facts = {"gpus_asked": args.gpus, "effects": args.effects, "start": window.start.isoformat(),
             "end": window.end.isoformat()}
    if args.data is not None and marker.exists():
        stored = json.loads(marker.read_text())
        if stored.get("facts") == facts:
            return {**stored["prepared"], "reused": str(args.data)}
        raise SystemExit(f"{args.data} holds another fleet or window ({stored.get('facts')}): "
                         "use an empty --data folder")
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    prepared = prepare(root, args.gpus, window, args.effects, piece)
    prepared["seconds"] = round(time.perf_counter() - started, 1)
    marker.write_text(json.dumps({"facts": facts, "prepared": prepared}))
    return prepared


def _figures(args: argparse.Namespace, window: Window, m: dict[str, Any]) -> dict[str, Any]:
    """The JSON: measured figures `m` beside their floors, and the month projection."""
    prepared, ours, prom_s, short_run = m["prepared"], m["ours"], m["prom_s"], m["short_run"]
    gpu_days = prepared["gpus"] * args.hours / 24
    per_gpu_day = ours["seconds"] / gpu_days
    floors = m["bulk_s"] + m["bare"]["seconds"] + m["floor_rollup"]["seconds"]
    return {
        "fleet": {"gpus": prepared["gpus"], "hours": args.hours, "effects": args.effects,
                  "start": window.start.isoformat(), "chunk": args.chunk,
                  "concurrency": args.concurrency},
        "load_average": os.getloadavg(),
        "prepare": prepared,
        "ours": {**ours, "rows_per_s": round(ours["gpu_sample_rows"] / ours["seconds"]),
                 "samples_per_s": round(prepared["samples"] / ours["seconds"])},
        "ours_query_range_path": m["query_path"],
        "prometheus_alone": {"seconds": round(prom_s, 2), "response_mb": round(m["prom_bytes"] / 1e6, 1),
                             "ratio_ours_over_prometheus": round(ours["seconds"] / prom_s, 2),
                             "note": "Prometheus answering the query_range path's requests alone"},
        "prometheus_alone_bulk_reads": {"seconds": round(m["bulk_s"], 2)},
        "bare_load": m["bare"],
        "rollup_alone": m["floor_rollup"],
        "memory_vs_window": [
            {"hours": m["short_hours"], "peak_rss_mib": short_run["peak_rss_mib"]},
            {"hours": args.hours, "peak_rss_mib": ours["peak_rss_mib"]},
        ],
        **({} if m["before"] is None else {"ours_before": {
            **m["before"], "tree": str(args.before),
            "ratio_before_over_ours": round(m["before"]["seconds"] / ours["seconds"], 2),
            "cpu_ratio_before_over_ours": round(m["before"]["cpu_s"] / ours["cpu_s"], 2)}}),
        "decode_align_cpu": {
            **m["stages"],
            "note": "one 2-hour remote read of the window, its answers parsed and aligned five "
                    "times in one thread (CPU seconds; `before` on the --before tree's code)"},
        **({} if m["linear"] is None else {"linearity": m["linear"]}),
        "ours_over_floors": {
            "note": "ours over the sum of its floors measured in this run (the bulk path's reads "
                    "alone + the bare load + the roll-up alone): the load-independent figure",
            "floors_s": round(floors, 2), "ratio": round(ours["seconds"] / floors, 2)},
        "projection": {
            "note": "a 1,000-GPU month (30 days) at the measured per-GPU-day rate; Prometheus alone "
                    "projected the same way is the floor of any query_range backfill",
            "seconds_per_gpu_day": round(per_gpu_day, 4),
            "month_1000_gpus_s": round(per_gpu_day * MONTH_GPU_DAYS),
            "prometheus_alone_month_s": round(prom_s / gpu_days * MONTH_GPU_DAYS),
            "goal_s": 600,
            "month_at_quiet_floors_s": round(ours["seconds"] / floors * QUIET_FLOORS_S / 250
                                             * MONTH_GPU_DAYS),
            "quiet_floors_note": "the ratio to the floors times the floors of the quiet run of "
                                 f"2026-12-01 15:55 ({QUIET_FLOORS_S} s for 1,000 GPUs x 6 h: reads "
                                 "1.42 + bare load 0.27 + roll-up 0.50), projected to the month",
        },
    }


if __name__ == "__main__":
    sys.exit(main())
