"""Each fleet advice kind on a simulated month: this tree beside main's, in the same run.

Run: `nice python -m bench.bench_advice [--gpus 256] [--period 2026-10] [--warehouse PATH]
[--base-ref bc7f130] [--base-warehouse PATH] [--kind K ...]`; writes bench/results/advice.json.

1. Data: the demo's month (`commands._demo_pipeline.demo_fleet`, the DRA pool, loaded and rolled
   up by `pipeline.load_and_rollup`, as `gpuledger demo` does), written once to `--warehouse`
   (default /tmp/advice-bench-<gpus>.duckdb) and reused on later runs of the same size.
2. Trees: ours (this working tree) and the baseline (`--base-ref`, default bc7f130, the main
   this branch started from), unpacked with `git archive` into /tmp/advice-base.
3. Each kind runs in a fresh child process per tree, the two trees one after the other for the
   same kind (so both see about the same machine load): the kind's function from
   `analytics.advice.KINDS` on the warehouse opened read-only, with default settings.
   Per kind and tree: wall seconds, CPU seconds (user + system of the child), peak resident
   memory (VmHWM: imports, DuckDB and the kind) and resident memory before the kind ran, and a
   sha256 of the kind's rows and document: the two trees must give the same digest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import unpack_tree, write_result

ROOT = Path(__file__).resolve().parent.parent
WORKER = r"""
import hashlib, json, resource, sys, time
from gpuledger.analytics.advice import KINDS
from gpuledger.core.config import load_settings
from gpuledger.core.period import Period
from gpuledger.warehouse import Warehouse

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            yield line.split(":")[0], int(line.split()[1]) / 1024

path, period, kind = sys.argv[1:4]
settings = load_settings(None)
window = Period.exact(period).window
with Warehouse.open(path, read_only=True) as wh:
    before = dict(hwm())["VmRSS"]
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    advice = KINDS.get(kind)(wh, window, settings)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
peak = dict(hwm())["VmHWM"]
text = json.dumps({"rows": advice.rows, "document": advice.document}, sort_keys=True, default=str)
print(json.dumps({"wall_s": round(wall, 3),
                  "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 3),
                  "rss_before_mib": round(before, 1), "peak_rss_mib": round(peak, 1),
                  "rows": len(advice.rows), "sha256": hashlib.sha256(text.encode()).hexdigest()}))
"""


def build_month(path: Path, gpus: int, period: str) -> None:
    """The demo's simulated month into `path` (skipped when it is already there)."""
    if path.exists():
        return
    from gpuledger.commands._demo_pipeline import demo_fleet
    from gpuledger.core.config import load_settings
    from gpuledger.core.period import Period
    from gpuledger.pipeline import load_and_rollup
    from gpuledger.simulator.dra_fleet import DraFleet
    from gpuledger.simulator.engine import Simulation
    from gpuledger.warehouse import Warehouse

    settings = load_settings(None)
    window = Period.exact(period).window
    sim = Simulation(demo_fleet(gpus), window, seed=7, idle_threshold=settings.idle.threshold,
                     idle_min_minutes=settings.idle.min_minutes)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with Warehouse.open(partial) as wh:
        load_and_rollup(wh, sim, settings, dra=DraFleet(window))
    partial.rename(path)


def unpack(ref: str, into: Path) -> Path:
    """The tree at `ref` (`git archive`, no git state changed), unpacked once."""
    return into if (into / "gpuledger").exists() else unpack_tree(ref, into)


def run_kind(tree: Path, warehouse: Path, period: str, kind: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GPULEDGER_CONFIG", None)
    done = subprocess.run([sys.executable, "-c", WORKER, str(warehouse), period, kind], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--period", default="2026-10")
    parser.add_argument("--warehouse", type=Path)
    parser.add_argument("--base-ref", default="bc7f130")
    parser.add_argument("--base-dir", type=Path, default=Path("/tmp/advice-base"))
    parser.add_argument("--kind", action="append", default=[])
    parser.add_argument("--base-warehouse", type=Path,
                        help="the same month at the schema the baseline reads (default: --warehouse; "
                        "a file this tree has migrated is newer than an older tree can open)")
    args = parser.parse_args()
    warehouse = args.warehouse or Path(f"/tmp/advice-bench-{args.gpus}.duckdb")
    build_month(warehouse, args.gpus, args.period)
    base = unpack(args.base_ref, args.base_dir)
    from gpuledger.analytics.advice import KINDS

    load_before = os.getloadavg()
    kinds: dict[str, Any] = {}
    for kind in args.kind or KINDS.names():
        main_ = run_kind(base, args.base_warehouse or warehouse, args.period, kind)
        ours = run_kind(ROOT, warehouse, args.period, kind)
        same = main_.get("sha256") is not None and main_.get("sha256") == ours.get("sha256")
        kinds[kind] = {"main": main_, "ours": ours, "same_result": same,
                       "speedup": round(main_["wall_s"] / ours["wall_s"], 2)
                       if "wall_s" in main_ and ours.get("wall_s") else None}
        print(kind, json.dumps(kinds[kind]), flush=True)
    total = {tree: {key: round(sum(k[tree].get(key, 0.0) for k in kinds.values()), 2)
                    for key in ("wall_s", "cpu_s")} for tree in ("main", "ours")}
    for tree, figures in total.items():
        figures["peak_rss_mib"] = max(k[tree].get("peak_rss_mib", 0.0) for k in kinds.values())
    write_result("advice", {
        "gpus": args.gpus, "period": args.period, "warehouse": str(warehouse),
        "warehouse_mib": round(warehouse.stat().st_size / 2**20, 1), "base_ref": args.base_ref,
        "kinds": kinds, "total": total,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "how": "each kind in a fresh child per tree, main then ours for the same kind; peak RSS is VmHWM "
               "of the child (imports and DuckDB included), rss_before_mib what it held before the kind",
    })


if __name__ == "__main__":
    main()
