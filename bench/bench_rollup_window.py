"""What one roll-up of the day so far costs as the day goes on: `collect` rolls up
`[midnight, now)` in every round (`collect_rollup`, rule 3: day-anchored windows), so the
batch grows through the day and the last round before midnight computes a whole day's hourly
rows and allocations at once.

    python -m bench.bench_rollup_window WAREHOUSE [--hours 1 --hours 6 --hours 12 --hours 23]
        [--memory-limit 2GiB] [--day 2026-10-29] [--name NAME]

WAREHOUSE: a month's warehouse (`bench_scale --build-only`) at this tree's schema, opened
read-only. Each window `[day, day + H hours)` is computed by
`analytics.usage.rollup.rollup_batch` in a fresh child process (nothing is stored) under
`warehouse.memory_limit`; recorded: wall, CPU, the child's peak RSS, the rows the batch holds.
The floor beside it is the same child counting the window's raw samples (`SELECT count(*)`):
a process that opens the warehouse and finds the window, what any roll-up pays first.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import load_average, write_result

CHILD = """
import json, resource, sys, time
from datetime import datetime, timedelta
from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.config_warehouse import WarehouseSettings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

path, day, hours, limit, what = sys.argv[1:6]
start = datetime.fromisoformat(day + "T00:00:00+00:00")
window = Window(start, start + timedelta(hours=int(hours)))
began, cpu = time.perf_counter(), time.process_time()
with Warehouse.open(path, read_only=True, limits=WarehouseSettings(memory_limit=limit)) as wh:
    if what == "rollup":
        rows = sum(f.height for f in rollup_batch(wh, window, Settings()).frames.values())
    else:
        rows = wh.scalar("SELECT count(*) FROM gpu_sample_values WHERE ts >= ? AND ts < ?",
                         [window.start, window.end])
print(json.dumps({"rows": int(rows), "wall_s": round(time.perf_counter() - began, 2),
                  "cpu_s": round(time.process_time() - cpu, 2),
                  "peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--hours", type=int, action="append", help="window lengths (default 1, 6, 12, 23)")
    parser.add_argument("--memory-limit", default="2GiB")
    parser.add_argument("--day", default="2026-10-29")
    parser.add_argument("--name", default="rollup_window")
    args = parser.parse_args()
    before = load_average()
    runs: dict[int, dict[str, Any]] = {}
    for hours in args.hours or [1, 6, 12, 23]:
        runs[hours] = {what: _child(args.warehouse, args.day, hours, args.memory_limit, what)
                       for what in ("rollup", "floor")}
    write_result(args.name, {
        "command": "rollup_batch of [day, day + H hours) in a fresh process, read-only",
        "warehouse": str(args.warehouse), "day": args.day, "memory_limit": args.memory_limit,
        "by_hours": runs, "load_average_before_after": [before, load_average()],
    })


def _child(warehouse: Path, day: str, hours: int, limit: str, what: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(warehouse), day, str(hours), limit, what],
                          capture_output=True, text=True, check=False)
    if done.returncode:  # the child's own one-line reason (a warehouse not migrated, say)
        raise SystemExit(f"{what} of {hours} h: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


if __name__ == "__main__":
    main()
