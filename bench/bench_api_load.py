"""Benchmark: a mixed `/api/v1` load at 10x the small demo, this tree beside main's, one run.

`python -m bench.bench_api_load [--gpus 320] [--period 2026-11] [--rounds 20] [--threads 4]
[--base REF] [--warehouse DEMO.duckdb]` writes
`bench/results/api_load.json`.

Issue 31: at 10x the small demo (the tests' demo fleet, `tests.dashboards.conftest.
build_demo_warehouse`, 32 GPUs; here `gpuledger demo` at 320 GPUs for a whole month),
`/api/v1/idle` was computed per request (0.56-0.93 s) and dragged the p95 of a mixed API load
to 3.0 s. Goal: p95 <= 500 ms.

1. Data: `gpuledger demo --gpus N --period P --no-serve` (this tree), its serving store
   published with the month results (`refresh-serving`, what the writer's side does).
2. For each tree (`--base`, default `main`, exported with `git archive` into a temporary folder,
   and this working tree) a child process (`bench/api_load_child.py`, PYTHONPATH at the tree)
   serves the same warehouse copy over HTTP, warms as after every snapshot, then issues
   `--rounds` rounds of the mix (bills as admin and lead, idle by owner, pod, team and
   namespace, recommendations, plans) from `--threads` clients at once. Children run one after
   the other, so they never share the CPUs.
3. Figures: p50 / p95 / max over all requests and per request kind, the first call of each
   kind after the warm-up, and any non-200 answer (there should be none).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import latency_stats, unpack_tree, write_result

GOAL_P95_MS = 500.0
ROOT = Path(__file__).resolve().parent.parent


def generate(folder: Path, gpus: int, period: str) -> Path:
    """`gpuledger demo --gpus N --period P --no-serve` (a month simulated, loaded, rolled up,
    billed, planned, reported), then its serving store published with the month results."""
    from tests.dashboards.conftest import store_results

    out = folder / "demo"
    subprocess.run([sys.executable, "-m", "gpuledger", "demo", "--gpus", str(gpus), "--period", period,
                    "--no-serve", "--out", str(out)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    path = out / "gpuledger.duckdb"
    store_results(path)
    return path


def measure(
    tree: Path, source: Path, work: Path, *, rounds: int, threads: int, period: str,
) -> dict[str, Any]:
    import json

    work.mkdir(parents=True)
    path = work / source.name
    for item in source.parent.iterdir():  # the warehouse and its published serving store
        if item.is_file():
            shutil.copyfile(item, work / item.name)
    out = work / "result.json"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, str(ROOT / "bench" / "api_load_child.py"), str(path), str(work / "cache"),
                    str(rounds), str(threads), str(out), period], check=True, env=env, cwd=tree)
    raw = json.loads(out.read_text())
    samples = raw.pop("samples")
    kinds: dict[str, list[float]] = {}
    for name, seconds, _status in samples:
        kinds.setdefault(name, []).append(seconds)
    return {**raw, "all": latency_stats([s for _, s, _ in samples]),
            "non_200": sum(1 for *_, status in samples if status != 200),
            "per_kind": {k: latency_stats(v) for k, v in sorted(kinds.items())}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--base", default="main")
    parser.add_argument("--period", default="2026-11")
    parser.add_argument("--warehouse", type=Path, default=None,
                        help="an existing `gpuledger demo` warehouse of --gpus and --period (copied)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        folder = Path(tmp)
        (folder / "data").mkdir()
        started = time.perf_counter()
        if args.warehouse is not None:  # a demo generated before (its serving store published here)
            from tests.dashboards.conftest import store_results

            (folder / "data" / "demo").mkdir()
            source = folder / "data" / "demo" / args.warehouse.name
            shutil.copyfile(args.warehouse, source)
            store_results(source)
        else:
            source = generate(folder / "data", args.gpus, args.period)
        generated = round(time.perf_counter() - started, 1)
        base = unpack_tree(args.base, folder / "base")
        load = {"rounds": args.rounds, "threads": args.threads, "period": args.period}
        before = measure(base, source, folder / "before", **load)
        ours = measure(ROOT, source, folder / "ours", **load)
    base_head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.base], capture_output=True,
                               text=True, check=False).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip()
    write_result("api_load", {
        "goal_p95_ms": GOAL_P95_MS, "load_average": os.getloadavg(),
        "data": {"gpus": args.gpus, "period": args.period, "demo": "gpuledger demo --no-serve",
                 "generate_s": generated},
        "load": {"rounds": args.rounds, "threads": args.threads, "mix": "bench/api_load_child.py MIX"},
        "before": {"tree": f"{args.base} ({base_head[:12]})", **before},
        "ours": {"tree": f"{head} (working tree)", **ours},
        "within_goal": ours["all"]["p95_ms"] <= GOAL_P95_MS,
        "command": " ".join(["python -m bench.bench_api_load", *sys.argv[1:]]),
    })


if __name__ == "__main__":
    main()
