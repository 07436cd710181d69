"""The overcommit advice alone at fleet scale (issue 34 item 2, docs/decisions/0229): today's
tree beside this one on `bench_scale`'s cached demo warehouses.

Run: `python -m bench.bench_overcommit [--gpus 256 ...] [--period 2026-10] [--baseline-ref REF]
[--cache DIR]`; adds the key `overcommit stage` to bench/results/scale.json (the rest of that
file, `bench_scale`'s refresh-serving figures, is kept).

Each run is `python -m gpuledger recommend --kind overcommit --period P -o json` of a tree, read
only on `bench_scale`'s warehouse (`--cache`/demo-<gpus>-<period>.duckdb, built by
`python -m bench.bench_scale --build-only`), one after the other, as a child reaped with
`os.wait4`: wall, user + system CPU seconds, peak RSS. Both read one copy of the warehouse,
migrated to this tree's schema first. The two trees' advice documents are
compared (the rows must be the same; floats to 1e-9 relative). Load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, machine_facts, unpack_tree

ROOT = Path(__file__).resolve().parent.parent


def measure(tree: Path, warehouse: Path, period: str, work: Path) -> dict[str, Any]:
    """`recommend --kind overcommit` of `tree` on `warehouse`: wall, CPU, peak RSS, the document."""
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GPULEDGER_WAREHOUSE", None)
    cmd = [sys.executable, "-m", "gpuledger", "recommend", "--kind", "overcommit", "--period", period,
           "--warehouse", str(warehouse), "-o", "json"]
    with open(work / "stdout", "w") as out, open(work / "stderr", "w") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    text = (work / "stdout").read_text()
    try:
        document: Any = json.loads(text)
    except ValueError:
        document = {"stderr_tail": (work / "stderr").read_text()[-800:]}
    return {"rc": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "document": document}


def migrated(source: Path, tmp: Path) -> Path:
    """A copy of `source` in `tmp` opened once for writing (migrated to this tree's schema, which
    the read-only runs need; the cache is left as `bench_scale` built it)."""
    from gpuledger.warehouse import Warehouse

    copy = tmp / source.name
    shutil.copyfile(source, copy)
    with Warehouse.open(copy):
        pass
    return copy


def largest_difference(a: Any, b: Any) -> float:
    """The largest relative difference of two numbers at the same place (inf: shapes differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return float("inf")
        return max((largest_difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return float("inf")
        return max((largest_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numbers:
        return 0.0 if a == b else float("inf")
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, action="append", default=[])
    parser.add_argument("--period", default="2026-10")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "bench-scale")
    parser.add_argument("--baseline-ref", default="main")
    args = parser.parse_args()
    figures: dict[str, Any] = {"command": "gpuledger recommend --kind overcommit --period "
                                          f"{args.period} -o json (read only, cached demo warehouse)",
                               "baseline_ref": args.baseline_ref, "machine": machine_facts(), "fleets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        baseline = unpack_tree(args.baseline_ref, Path(tmp) / "baseline")
        for gpus in args.gpus or [256]:
            warehouse = migrated(args.cache / f"demo-{gpus}-{args.period}.duckdb", Path(tmp))
            fleet: dict[str, Any] = {"warehouse": str(warehouse), "load_average_1_5_15": {"before": _load()}}
            for name, tree in (("baseline", baseline), ("ours", ROOT)):
                fleet[name] = measure(tree, warehouse, args.period, Path(tmp) / f"{name}-{gpus}")
                fleet["load_average_1_5_15"][f"after {name}"] = _load()
            base, ours = fleet["baseline"].pop("document"), fleet["ours"].pop("document")
            both_ran = fleet["baseline"]["rc"] == fleet["ours"]["rc"] == 0
            fleet["same_document_to_1e-9"] = both_ran and largest_difference(base, ours) <= 1e-9
            fleet["largest_relative_difference"] = largest_difference(base, ours)
            found = ours.get("overcommit", {}) if isinstance(ours, dict) else {}
            fleet["pools"] = len(found.get("pools", []))
            figures["fleets"][str(gpus)] = fleet
            print(json.dumps({gpus: fleet}, indent=2), flush=True)
    path = RESULTS / "scale.json"
    document = json.loads(path.read_text()) if path.exists() else {"benchmark": "scale"}
    document["overcommit stage"] = figures
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
