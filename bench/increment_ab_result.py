"""`bench/increment_ab.sh`'s log as a result in bench/results (issue 34): each run's wall, CPU,
peak RSS, load average and the command's own per-result seconds, and each tree's median.

Run: `python -m bench.increment_ab_result LOG NAME BASE_REF [--gpus 1000] [--note TEXT]`
(`increment_ab.sh` runs it itself when given a NAME)."""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Any

from bench.common import write_result

RUN = re.compile(r"(base|ours) run (\d+): ([\d.]+) s ([\d.]+)\+([\d.]+) cpu (\d+) KB")
LOAD = re.compile(r"load ([\d.]+) ([\d.]+) ([\d.]+) results (.*)")


def runs(log: str) -> list[dict[str, Any]]:
    """Every timed run of the log, in order (a run's line, then its load and results line)."""
    lines = log.splitlines()
    found: list[dict[str, Any]] = []
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        timed, extra = RUN.match(line), LOAD.search(after)
        if timed is None or extra is None:
            continue
        output = json.loads(extra[4])
        found.append({
            "tree": timed[1], "run": int(timed[2]), "wall_s": float(timed[3]),
            "cpu_s": round(float(timed[4]) + float(timed[5]), 2), "peak_rss_mib": round(int(timed[6]) / 1024),
            "load_1_5_15": [float(extra[i]) for i in (1, 2, 3)],
            **{key: output.get(key) for key in ("seconds", "results_s", "days_rewritten", "tables_copied")},
        })
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("log", type=Path)
    parser.add_argument("name")
    parser.add_argument("base_ref")
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    found = runs(args.log.read_text())
    if not found:
        raise SystemExit(f"{args.log}: no timed run in this log")
    median = {tree: statistics.median(r["wall_s"] for r in found if r["tree"] == tree)
              for tree in ("base", "ours") if any(r["tree"] == tree for r in found)}
    write_result(args.name, {"command": "gpuledger refresh-serving --force -o json, one hour later",
                             "gpus": args.gpus, "baseline_ref": args.base_ref, "runs": found,
                             "median_wall_s": median, "note": args.note})


if __name__ == "__main__":
    main()
