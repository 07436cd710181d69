"""Benchmark: ingest DCGM history from a real Prometheus into the warehouse.

    python -m bench.bench_collect [--gpus 1000] [--days 30] [--mem-days 1 4]

1. Write an OpenMetrics history: `--gpus` whole GPUs (8 per node), 8 DCGM fields at 60 s, pods
   changing every 6 h (so series churn like a real fleet), and backfill Prometheus with promtool.
2. Ours: `collect_window` into a fresh DuckDB file (the full pipeline: chunked, sharded,
   concurrent POST queries, JSON → Polars, screening, pivot, load). Samples/s counted as
   gpu_samples rows x 8 fields.
   Twice: `read_path: auto` (the default; streamed remote read of the raw DCGM series on
   Prometheus, docs/decisions/0124) and `read_path: query_range` (the PromQL fallback).
3. Prometheus alone: the very requests the query_range run sent (recorded), replayed with the
   same concurrency, bodies read and discarded. Ratio ours (auto) / Prometheus (goal ≤ 1: the
   bulk path costs less than Prometheus answering the range queries alone); the query_range
   run's ratio is kept (goal ≤ 1.5). The bulk run's requests are replayed too: the engine's
   own share of the bulk run.
4. Baseline: `prometheus-api-client`'s `custom_query_range` + `MetricRangeDataFrame` on the same
   DCGM range queries with the same concurrency (frames built, not even loaded). Ratio
   baseline / ours (goal ≥ 5), end to end and client side (each minus its engine's own time).
   The load average is recorded: the machine is shared, only same-run ratios count.
5. Peak memory vs window size: the pipeline in a fresh subprocess for each `--mem-days`
   window; peak RSS should stay flat (bounded by the chunk, not the window).
Results: bench/results/collect.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from bench.common import write_result
from gpuledger.core.config import Settings
from gpuledger.core.window import Window

T0 = datetime(2026, 9, 1, tzinfo=UTC)
FIELDS = (
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
)
POD_HOURS = 6


def write_history(path: Path, gpus: int, days: float) -> int:
    """The OpenMetrics file; returns the number of samples."""
    steps = int(days * 1440)
    t0 = int(T0.timestamp())
    n = 0
    with path.open("w") as out:
        for f_idx, metric in enumerate(FIELDS):
            out.write(f"# TYPE {metric} gauge\n")
            for g in range(gpus):
                base = (f'gpu="{g % 8}",UUID="GPU-{g:08d}",Hostname="gpu-node-{g // 8:04d}.example",'
                        f'modelName="NVIDIA H100 80GB HBM3",DCGM_FI_DRIVER_VERSION="580.82.07"')
                seg = POD_HOURS * 60
                for s0 in range(0, steps, seg):
                    seg_id = (g * 31 + s0 // seg) % 97
                    held = seg_id % 5 != 0
                    workload = f',namespace="team-{seg_id % 7}",pod="job-{g}-{s0 // seg}",container="main"'
                    labels = base + (workload if held else "")
                    scale = 100.0 if "UTIL" in metric else 80000.0 if "FB_" in metric else \
                        700.0 if "POWER" in metric else 1.0
                    lines = []
                    for k in range(s0, min(s0 + seg, steps)):
                        v = ((k * 7 + g * 13 + f_idx) % 100) / 100.0 * scale
                        lines.append(f"{metric}{{{labels}}} {v:.4g} {t0 + 60 * k}\n")
                    out.writelines(lines)
                    n += len(lines)
        out.write("# EOF\n")
    return n


Log = list[tuple[str, Any]]


def replay(url: str, log: Log, concurrency: int) -> tuple[float, int]:
    """Send the recorded requests again, same concurrency; return (seconds, bytes). A bytes
    body is a remote-read request (sent with its headers); the probes are left out."""
    from gpuledger.collectors.remote_read import HEADERS

    local = __import__("threading").local()

    def one(item: tuple[str, Any]) -> int:
        session = getattr(local, "s", None) or requests.Session()
        local.s = session
        path, form = item
        if isinstance(form, bytes):
            r = session.post(url + path, data=form, headers=HEADERS, timeout=600)
        else:
            method = "GET" if "/label/" in path or "/status/" in path else "POST"
            r = session.request(method, url + path, data=form if method == "POST" else None,
                                params=form if method == "GET" else None, timeout=600)
        r.raise_for_status()
        return len(r.content)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        size = sum(pool.map(one, log))
    return time.perf_counter() - started, size


def baseline(url: str, log: Log, concurrency: int) -> tuple[float, int]:
    """prometheus-api-client: custom_query_range + MetricRangeDataFrame for the DCGM queries."""
    from prometheus_api_client import MetricRangeDataFrame, PrometheusConnect

    queries = [form for path, form in log if path.endswith("query_range") and "DCGM_FI_" in form["query"]]
    local = __import__("threading").local()

    def one(form: dict[str, str]) -> int:
        pc = getattr(local, "pc", None) or PrometheusConnect(url=url, method="POST")
        local.pc = pc
        data = pc.custom_query_range(
            form["query"], datetime.fromtimestamp(float(form["start"]), UTC),
            datetime.fromtimestamp(float(form["end"]), UTC), step=form["step"])
        return len(MetricRangeDataFrame(data)) if data else 0

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        rows = sum(pool.map(one, queries))
    return time.perf_counter() - started, rows


def run_ours(url: str, warehouse: Path, days: float, settings: Settings) -> dict[str, Any]:
    """The whole pipeline into a fresh warehouse, its requests recorded (probes excluded)."""
    from gpuledger.collect_pipeline import collect_window
    from gpuledger.collectors.prometheus import PrometheusCollector
    from gpuledger.warehouse import Warehouse

    window = Window(T0, T0 + timedelta(days=days))
    collector = PrometheusCollector(url, settings, now=lambda: window.end + timedelta(hours=1),
                                    namespaces_from_metrics=True)
    collector.choose_read_path()  # the probes: once per collector, not part of a replay
    collector.http.log = []
    started = time.perf_counter()
    with Warehouse.open(warehouse) as wh:
        report = collect_window(wh, settings, url, window, collector=collector,
                                now=lambda: window.end + timedelta(hours=1))
        rows = wh.count("gpu_samples")
    seconds = time.perf_counter() - started
    collector.close()
    return {"seconds": seconds, "rows": rows, "chunks": report.chunks, "queries": report.queries,
            "bytes": report.bytes, "log": collector.http.log, "read_path": collector.read_path}


def run_collect_only(url: str, days: float, settings: Settings) -> dict[str, Any]:
    """The collector alone: every chunk's frames built, nothing loaded (as the baseline)."""
    from gpuledger.collectors.prometheus import PrometheusCollector

    window = Window(T0, T0 + timedelta(days=days))
    with PrometheusCollector(url, settings, now=lambda: window.end + timedelta(hours=1)) as collector:
        collector.choose_read_path()
        started = time.perf_counter()
        rows = sum(chunk.samples for chunk in collector.iter_chunks(window))
        return {"seconds": time.perf_counter() - started, "rows": rows, "read_path": collector.read_path}


MEMORY_CHILD = """
import json, resource, sys
from pathlib import Path
from bench.bench_collect import run_ours
from gpuledger.core.config import Settings
url, wh, days, conc, chunk, path = sys.argv[1:7]
settings = Settings(prometheus={"max_concurrency": int(conc), "chunk": chunk, "read_path": path})
out = run_ours(url, Path(wh), float(days), settings)
print(json.dumps({"rows": out["rows"], "seconds": out["seconds"], "read_path": out["read_path"],
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--chunk", default="1d", help="load batch (prometheus.chunk)")
    parser.add_argument("--mem-days", type=float, nargs="*", default=None,
                        help="window sizes (days, each ≤ --days) for the peak-memory runs")
    parser.add_argument("--result", default="collect", help="bench/results/<name>.json")
    args = parser.parse_args(argv)
    from tools.metrics_servers import start_prometheus

    def settings(path: str) -> Settings:
        return Settings.model_validate({"prometheus": {
            "max_concurrency": args.concurrency, "chunk": args.chunk, "read_path": path}})

    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        root = Path(tmp)
        om = root / "history.om"
        (samples, gen_s) = _timed(lambda: write_history(om, args.gpus, args.days))
        print(f"wrote {samples} samples ({om.stat().st_size / 1e6:.0f} MB) in {gen_s:.1f}s", flush=True)
        started = time.perf_counter()
        server = start_prometheus(root, openmetrics=om)
        backfill_s = time.perf_counter() - started
        om.unlink()
        try:
            for path in ("query_range", "auto"):  # warm caches
                run_ours(server.url, root / f"warmup-{path}.duckdb", min(args.days, 0.25), settings(path))
            load.append(os.getloadavg())
            bulk = run_ours(server.url, root / "bulk.duckdb", args.days, settings("auto"))
            print(f"ours ({bulk['read_path']}): {bulk['rows']} rows in {bulk['seconds']:.1f}s", flush=True)
            ours = run_ours(server.url, root / "w.duckdb", args.days, settings("query_range"))
            print(f"ours (query_range): {ours['rows']} rows in {ours['seconds']:.1f}s", flush=True)
            only = {path: run_collect_only(server.url, args.days, settings(path))
                    for path in ("auto", "query_range")}
            prom_s, prom_bytes = replay(server.url, ours["log"], args.concurrency)
            print(f"prometheus alone, query_range: {prom_s:.1f}s", flush=True)
            read_s, read_bytes = replay(server.url, bulk["log"], args.concurrency)
            print(f"prometheus alone, {bulk['read_path']}: {read_s:.1f}s", flush=True)
            base_s, base_rows = baseline(server.url, ours["log"], args.concurrency)
            print(f"prometheus-api-client: {base_s:.1f}s", flush=True)
            load.append(os.getloadavg())
            memory = _memory(server.url, root, args)
        finally:
            server.stop()
    figures = _figures(args, samples, gen_s, backfill_s, bulk=bulk, ours=ours, prom=(prom_s, prom_bytes),
                       read=(read_s, read_bytes), base=(base_s, base_rows))
    figures["collect_only"] = {
        "note": "frames built, nothing loaded: the same work as the baseline's (which loads nothing)",
        **{run["read_path"]: {"seconds": round(run["seconds"], 2), "gpu_sample_rows": run["rows"],
                              "ratio_baseline_over_this": round(base_s / run["seconds"], 2)}
           for run in only.values()}}
    figures["peak_memory_vs_window"] = memory
    figures["load_average_1_5_15"] = {"start": load[0], "before_runs": load[1], "after_runs": load[2]}
    write_result(args.result, figures)
    return 0


def _memory(url: str, root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Peak RSS of the whole pipeline (read_path auto) in a fresh process per window size."""
    memory = []
    for days in args.mem_days or sorted({min(args.days, 1.0), args.days}):
        child = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, url, str(root / f"m{days}.duckdb"),
             str(days), str(args.concurrency), args.chunk, "auto"],
            capture_output=True, text=True, check=True)
        memory.append({"window_days": days, **json.loads(child.stdout.strip().splitlines()[-1])})
    return memory


def _run_figures(run: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    samples = run["rows"] * len(FIELDS)
    return {"read_path": run["read_path"], "seconds": round(run["seconds"], 2),
            "gpu_sample_rows": run["rows"],
            "samples": samples, "samples_per_s": round(samples / run["seconds"]),
            "requests": run["queries"], "chunks": run["chunks"], "response_mb": round(run["bytes"] / 1e6, 1),
            "concurrency": args.concurrency, "chunk": args.chunk}


def _figures(args: argparse.Namespace, samples: int, gen_s: float, backfill_s: float, *,
             bulk: dict[str, Any], ours: dict[str, Any], prom: tuple[float, int],
             read: tuple[float, int], base: tuple[float, int]) -> dict[str, Any]:
    (prom_s, prom_bytes), (read_s, read_bytes), (base_s, base_rows) = prom, read, base
    return {
        "size": {"gpus": args.gpus, "days": args.days, "fields": len(FIELDS), "step_s": 60,
                 "samples_written": samples, "requested": {"gpus": 1000, "days": 30}},
        "setup_s": {"generate": round(gen_s, 1), "promtool_backfill_and_start": round(backfill_s, 1)},
        "ours": {**_run_figures(bulk, args),
                 "note": "the default read_path auto: streamed remote read of the raw DCGM series"},
        "ours_query_range": {**_run_figures(ours, args), "note": "read_path query_range (the fallback)",
                             "ratio_over_prometheus_alone": round(ours["seconds"] / prom_s, 2),
                             "goal": "<= 1.5"},
        "prometheus_alone": {
            "seconds": round(prom_s, 2), "response_mb": round(prom_bytes / 1e6, 1),
            "note": "the query_range path's requests replayed, bodies read and discarded",
            "ratio_ours_over_prometheus": round(bulk["seconds"] / prom_s, 2), "goal": "<= 1"},
        "bulk_read_alone": {
            "read_path": bulk["read_path"], "seconds": round(read_s, 2),
            "response_mb": round(read_bytes / 1e6, 1),
            "note": "the bulk path's requests replayed: the engine's own share of ours",
            "ratio_ours_over_bulk_read_alone": round(bulk["seconds"] / read_s, 2)},
        "prometheus_api_client": {
            "seconds": round(base_s, 2), "rows": base_rows,
            "ratio_baseline_over_ours": round(base_s / bulk["seconds"], 2), "goal": ">= 5",
            "ratio_baseline_over_ours_query_range": round(base_s / ours["seconds"], 2),
            "note": "custom_query_range + MetricRangeDataFrame only; no warehouse load",
        },
        "client_side": {
            "note": "time beyond the engine's own answering (each run minus its requests replayed)",
            "ours_s": round(bulk["seconds"] - read_s, 2),
            "ours_query_range_s": round(ours["seconds"] - prom_s, 2),
            "baseline_s": round(base_s - prom_s, 2),
        },
    }


def _timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
