"""The hourly `refresh-serving` increment on a warehouse too large to copy for every run (issue
34: the 10,000-GPU month is 13.5 GB, the machine's free disk about twice that): each run first
removes the month's then-last hour in place (`bench_scale.remove_last_hour`, untimed), then one
tree's `refresh-serving --force` runs on it, so every run recomputes the running day's parts and
every month result from the other days' kept parts, as the hour a collect round adds would make
it. The trees run in ABBA order by default (the running day shrinks by an hour a run: neither
tree gets the shorter days) and share the warehouse's day parts and serving store (both trees'
parts must be the same SQL: their `per_minute_query_version`s differ otherwise, and each run
would read the month whole; and one schema version: there is no copy for each to migrate). A
tree before decision 0281 keeps its parts in a DuckDB file (`<W>.dayparts.duckdb`), one after it
in a folder (`<W>.dayparts/`), each its own; the folder's making removes the file, so against
such a baseline the file is kept aside while this tree's parts are first filled and put back
after (`scale_increment_10000_day_part_files` did so by hand).

Run: `python -m bench.increment_in_place WAREHOUSE BASE_REF [--order base,ours,ours,base]
[--memory-limit 4GiB] [--prime] [--name NAME]`; `--prime` first removes the last hour and runs
this tree's refresh once, recorded as `primed` (a warehouse whose day parts were never kept is
read whole by its first refresh: the month's full figure).
Each run: wall, user + system CPU seconds, the child's own peak RSS (`bench.common.OWN_PEAK`),
the command's own per-result seconds, the load average before it; written to
bench/results/NAME.json."""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_scale import remove_last_hour
from bench.common import child_run, load_average, unpack_tree, write_result

ROOT = Path(__file__).resolve().parent.parent


def refresh(tree: Path, warehouse: Path, config: Path, work: Path) -> dict[str, Any]:
    """`tree`'s `refresh-serving --force -o json` on `warehouse` under `config` (`child_run`):
    wall, user + system CPU, its own peak RSS and the command's JSON output."""
    figures = child_run(tree, warehouse, work, ["refresh-serving", "--force", "-o", "json"], config)
    if figures.pop("rc") != 0:
        raise SystemExit(f"{tree}: refresh-serving failed: {(work / 'stderr').read_text()[-600:]}")
    return {**figures, "output": json.loads((work / "stdout").read_text())}


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    """A run's figures and its per-result seconds, without the rest of its output."""
    return {**{k: v for k, v in run.items() if k != "output"}, "results_s": run["output"].get("results_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("base_ref")
    parser.add_argument("--order", default="base,ours,ours,base")
    parser.add_argument("--memory-limit", default="4GiB")
    parser.add_argument("--prime", action="store_true", help="first refresh once with this tree, untimed")
    parser.add_argument("--name", default="scale_increment_in_place")
    args = parser.parse_args()
    warehouse = args.warehouse.resolve()
    order = args.order.split(",")
    if not warehouse.exists() or set(order) - {"base", "ours"}:
        raise SystemExit(f"usage: {warehouse} must exist; --order names only base and ours")
    ref = subprocess.run(["git", "rev-parse", "--short", args.base_ref], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="increment-in-place-") as tmp:
        work = Path(tmp)
        trees = {"base": unpack_tree(ref, work / "base-tree"), "ours": ROOT}
        config = work / "gpuledger.yaml"
        config.write_text(f"warehouse:\n  memory_limit: {args.memory_limit}\n")
        if args.prime:  # an hour removed first: a month whose results are current computes nothing
            remove_last_hour(warehouse)
        primed = _brief(refresh(ROOT, warehouse, config, work)) if args.prime else None
        runs = []
        for tree in order:
            started = time.perf_counter()
            remove_last_hour(warehouse)
            removed_s = round(time.perf_counter() - started, 1)
            run = {"tree": tree, "load_before": load_average(), "hour_removed_s": removed_s,
                   **refresh(trees[tree], warehouse, config, work)}
            print(json.dumps(_brief(run)), flush=True)
            runs.append(run)
    write_result(args.name, {
        "what": __doc__.split("\n\n")[0], "command": "gpuledger refresh-serving --force -o json",
        "warehouse": str(warehouse), "warehouse_mib": round(warehouse.stat().st_size / 2**20, 1),
        "baseline_ref": ref, "memory_limit": args.memory_limit, "primed": primed, "runs_in_order": runs})


if __name__ == "__main__":
    main()
