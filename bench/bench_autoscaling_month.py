"""The autoscaling replay's month in passes (decision 0269): `autoscaling_proposals` over a
month whose day parts are kept, once per `REPLAY_BUDGET` given, each in its own process (its
peak RSS its own), side by side in one run: wall, CPU, peak RSS, the passes taken, and a digest
of the proposals (every budget must give the same).

    python -m bench.bench_autoscaling_month --warehouse W.duckdb --budget-mib 100000 --budget-mib 48

The warehouse's day parts are filled first (`<W>.dayparts/`, a read of the month), so
every measured run decodes the same kept days; a 1,000-GPU month is built by
`python -m bench.bench_scale --gpus 1000 --build-only`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
from typing import Any

from bench.common import load_average, write_result


def child(warehouse: str, period: str, budget_mib: float) -> dict[str, Any]:
    from gpuledger.analytics.advice import autoscaling_month
    from gpuledger.analytics.advice.run import autoscaling_proposals
    from gpuledger.core.config import Settings
    from gpuledger.core.period import Period
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.day_parts import kept_day_parts

    autoscaling_month.REPLAY_BUDGET = int(budget_mib * 2**20)
    window = Period.exact(period).window
    with Warehouse.open(warehouse, read_only=True) as wh, kept_day_parts(warehouse) as days:
        started, cpu = time.perf_counter(), time.process_time()
        found = autoscaling_proposals(wh, window, Settings(), days=days)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        reads, hits = (days.reads, days.hits) if days else (None, None)
    digest = hashlib.sha256(json.dumps([p.as_dict() for p in found]).encode()).hexdigest()[:16]
    peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"budget_mib": budget_mib, "deployments": len(found), "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "peak_rss_mib": peak, "days_queried": reads, "days_decoded": hits,
            "proposals_sha256": digest}


def run(warehouse: str, period: str, budget_mib: float) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.bench_autoscaling_month", "--child", str(budget_mib),
                          "--warehouse", warehouse, "--period", period],
                         capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--period", default="2026-10")
    parser.add_argument("--budget-mib", type=float, action="append", default=[])
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--name", default="autoscaling_month_passes")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.warehouse, args.period, args.child)))
        return
    fill = run(args.warehouse, args.period, 1e9)  # the day parts kept, as after a refresh
    loads = {"before": load_average()}
    runs = []
    for budget in args.budget_mib or [1e9]:
        runs.append(run(args.warehouse, args.period, budget))
        loads[f"after {budget:g} MiB"] = load_average()
    write_result(args.name, {"warehouse": args.warehouse, "period": args.period, "fill": fill,
                             "runs": runs, "load_average_1_5_15": loads,
                             "same_proposals": len({r["proposals_sha256"] for r in [*runs, fill]}) == 1})


if __name__ == "__main__":
    main()
