"""Simulator + warehouse load rate for 1,000 GPUs x 1 day, against naive baselines.

Run: `python -m bench.bench_simulator [--gpus 1000] [--hours 24]`. Figures, side by side:
- ours: the vectorized simulator streaming one day of samples (rows/s), the warehouse load of
  those frames through `Warehouse.load(LoadBatch)` (rows/s), ground truth and OpenMetrics;
- baseline: a straightforward per-row Python generator of the same `gpu_samples` rows
  (`random` per value, dicts into a frame), and row-by-row `executemany` inserts into DuckDB,
  each timed on a slice and reported as rows/s.
Writes bench/results/simulator.json with machine facts.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from bench.common import peak_rss_mib, write_result
from gpuledger.core.frames import GPU_SAMPLES
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.schema import table_ddl

START = datetime(2026, 11, 2, tzinfo=UTC)


def ours(gpus: int, hours: int, tmp: Path) -> dict[str, Any]:
    window = Window(START, START + timedelta(hours=hours))
    t0 = time.perf_counter()
    sim = Simulation(FleetSpec.default(gpus=gpus), window, seed=7)
    build_s = time.perf_counter() - t0
    sim_s = load_s = 0.0
    rows = gpu_rows = 0
    with Warehouse.open(tmp / "bench.duckdb") as wh:
        inventory = sim.inventory()
        wh.load(LoadBatch(inventory))
        chunk = timedelta(hours=min(hours, 6))
        started = time.perf_counter()
        for sub, frames in sim.batches(chunk):
            sim_s += time.perf_counter() - started
            n = sum(f.height for f in frames.values())
            rows += n
            gpu_rows += frames["gpu_samples"].height
            t = time.perf_counter()
            wh.load(LoadBatch(frames, window=sub))
            load_s += time.perf_counter() - t
            started = time.perf_counter()
        stored = sum(wh.count(t) for t in ("gpu_samples", "token_samples", "queue_samples"))
    assert stored == rows, (stored, rows)
    t = time.perf_counter()
    truth = sim.ground_truth()
    truth_s = time.perf_counter() - t
    om_window = Window(START, START + timedelta(hours=1))
    om_sim = Simulation(FleetSpec.default(gpus=gpus), om_window, seed=7)
    t = time.perf_counter()
    counts = om_sim.write_openmetrics(tmp / "bench.om")
    om_s = time.perf_counter() - t
    om_bytes = (tmp / "bench.om").stat().st_size
    return {
        "gpus": sim.gpu_count, "hours": hours, "pods": sim.pod_count,
        "build_s": round(build_s, 2),
        "sample_rows": rows, "gpu_sample_rows": gpu_rows,
        "simulate_s": round(sim_s, 2), "simulate_rows_per_s": round(rows / sim_s),
        "load_s": round(load_s, 2), "load_rows_per_s": round(rows / load_s),
        "end_to_end_rows_per_s": round(rows / (build_s + sim_s + load_s)),
        "ground_truth_rows": truth.height, "ground_truth_s": round(truth_s, 2),
        "ground_truth_card_hours": round(float(truth["card_hours"].sum()), 6),
        "openmetrics_1h_samples": sum(counts.values()), "openmetrics_1h_s": round(om_s, 2),
        "openmetrics_samples_per_s": round(sum(counts.values()) / om_s),
        "openmetrics_1h_mib": round(om_bytes / 2**20, 1),
        "peak_rss_mib": round(peak_rss_mib()),
    }


def baseline_generator(gpus: int, minutes: int) -> dict[str, Any]:
    """Per-row Python: what a first simulator would do (one dict per sample)."""
    rng = random.Random(7)
    t = time.perf_counter()
    rows = []
    for g in range(gpus):
        uuid, node = f"GPU-{g:08d}", f"node-{g // 8:03d}"
        held = rng.random() < 0.8
        for m in range(minutes):
            act = rng.uniform(0.3, 0.9) if held else 0.0
            rows.append({
                "ts": START + timedelta(minutes=m), "node": node, "uuid": uuid, "gpu_i_id": -1,
                "mig_profile": None, "vgpu": None, "namespace": "ns" if held else None,
                "pod": f"pod-{g}" if held else None, "container": "c" if held else None,
                "gr_engine_active": act, "sm_active": act * rng.uniform(0.8, 0.95),
                "gpu_util": round(act * 100), "fb_used_mib": rng.uniform(0, 80000),
                "fb_free_mib": rng.uniform(0, 80000), "power_w": 70 + 600 * act,
                "tensor_active": act * 0.5, "dram_active": act * rng.uniform(0.3, 0.6),
                "gpu_temp_c": 31 + 45 * act,
            })
    frame = pl.DataFrame(rows)
    seconds = time.perf_counter() - t
    return {"rows": frame.height, "s": round(seconds, 2), "rows_per_s": round(frame.height / seconds)}


def baseline_insert(tmp: Path, frame: pl.DataFrame) -> dict[str, Any]:
    """Row-by-row `executemany` INSERT into DuckDB (no Arrow, no bulk path)."""
    con = duckdb.connect(str(tmp / "baseline.duckdb"))
    con.execute(table_ddl(GPU_SAMPLES))
    cols = GPU_SAMPLES.column_names
    data = frame.select(cols).rows()
    t = time.perf_counter()
    con.executemany(
        f"INSERT INTO gpu_samples ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})", data
    )
    seconds = time.perf_counter() - t
    con.close()
    return {"rows": len(data), "s": round(seconds, 2), "rows_per_s": round(len(data) / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        figures = ours(args.gpus, args.hours, tmp)
        slice_sim = Simulation(FleetSpec.default(gpus=64), Window(START, START + timedelta(hours=1)), seed=7)
        sample = next(slice_sim.batches(timedelta(hours=1)))[1]["gpu_samples"].head(1_000)
        result = {
            "fleet": {"gpus": figures["gpus"], "hours": args.hours, "step": "60s"},
            "ours": figures,
            "baseline": {
                "per_row_python_generator": baseline_generator(args.gpus, 60),
                "row_by_row_insert": baseline_insert(tmp, sample),
            },
        }
    result["speedup"] = {
        "generate": round(figures["simulate_rows_per_s"]
                          / result["baseline"]["per_row_python_generator"]["rows_per_s"], 1),
        "load": round(figures["load_rows_per_s"] / result["baseline"]["row_by_row_insert"]["rows_per_s"], 1),
    }
    write_result("simulator", result)


if __name__ == "__main__":
    main()
