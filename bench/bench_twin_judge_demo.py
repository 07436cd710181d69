"""The demo's quota plan judged on the scheduling twin (issue 36 Done-when; decision 0239).

Run after `gpuledger demo --no-serve --out DIR` and `python -m tools.twin_build build`:

    nice python -m bench.bench_twin_judge_demo DIR/gpuledger.duckdb [--start ISO] [--minutes N]

Judges the newest quota plan of the demo warehouse with `tools.twin.judge.judge` (it attaches
the effect to the plan in that warehouse) and writes bench/results/twin_judge_demo.json: the
attached effect, the `plans show` side-by-side section, wall time and load average.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.common import write_result
from tools.twin.judge import judge, utc_time


def main(argv: list[str] | None = None) -> int:
    from gpuledger.optimizer.plan.render import fold, table
    from gpuledger.optimizer.plan.render_twin import render_side_by_side
    from gpuledger.optimizer.plan.store import list_plans
    from gpuledger.warehouse import Warehouse

    parser = argparse.ArgumentParser(prog="python -m bench.bench_twin_judge_demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--start", type=utc_time)
    parser.add_argument("--minutes", type=int, default=30)
    args = parser.parse_args(argv)
    with Warehouse.open(args.warehouse, read_only=True) as wh:
        plan = list_plans(wh, kind="quota")[0].plan
    load_start, t = list(os.getloadavg()), time.monotonic()
    done = judge(args.warehouse, plan.id, start=args.start, minutes=args.minutes)
    write_result("twin_judge_demo", {
        "warehouse": "gpuledger demo --no-serve --period 2026-11 (seed 7, 256 GPUs)", "plan_id": plan.id,
        "wall_s": round(time.monotonic() - t, 1), "load_average_start": load_start,
        "load_average_after": list(os.getloadavg()),
        "admitted": [len(r.jobs_with("admitted")) for r in (done.before, done.after)],
        "ever_pending": [len(r.jobs_with("pending")) for r in (done.before, done.after)],
        "preempted": [len(r.jobs_with("preempted")) for r in (done.before, done.after)],
        "timings": [done.before.timings, done.after.timings],
        "plans_show": render_side_by_side(plan.evaluation, done.effect, table, fold).splitlines(),
        "twin_effect": done.effect.model_dump(mode="json"),
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
