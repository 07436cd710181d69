"""Shared helpers for benchmarks: machine facts, peak memory, timing, latency figures, a baseline
tree, a gpuledger command measured as a child, writing results."""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any, TypeVar

RESULTS = Path(__file__).parent / "results"
T = TypeVar("T")


def machine_facts() -> dict[str, Any]:
    """What the figures were measured on (absolute times on shared machines drift)."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem_gib = round(pages / 2**30, 1)
    except (ValueError, OSError):
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_gib": mem_gib,
        "commit": commit or None,
    }


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def latency_stats(seconds: list[float]) -> dict[str, float]:
    """p50 / p95 / max in milliseconds of request or call times given in seconds, and their count."""
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * len(ms)) - 1))]
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(p95, 1), "max_ms": round(ms[-1], 1),
            "n": len(ms)}


def unpack_tree(ref: str, into: Path) -> Path:
    """The repository's tree at `ref` as files in `into` (`git archive`, no git state changed;
    symlinks kept: `gpuledger/` links the stages), for a baseline measured in the same run."""
    into.mkdir(parents=True, exist_ok=True)
    data = subprocess.run(["git", "archive", ref], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="tar")
    return into


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages, rounded: recorded around each run, because wall
    seconds on a shared machine drift with them."""
    return [round(v, 2) for v in os.getloadavg()]


MIGRATE = "import sys; from gpuledger.warehouse import Warehouse; Warehouse.open(sys.argv[1]).close()"
"""A child's script that opens the warehouse at argv[1] for writing: migrated to its tree's schema."""


OWN_PEAK = """import atexit, runpy, sys
report = sys.argv.pop(1)
def high_water():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(report, "w") as out:
        out.write(kib)
atexit.register(high_water)
sys.argv[0] = "gpuledger"
runpy.run_module("gpuledger", run_name="__main__", alter_sys=True)
"""
"""`python -m gpuledger ARGS` that writes its own peak resident memory (KiB, `VmHWM`) to the
file named first when it ends. Not the child's `ru_maxrss`: Linux counts in it the memory of
the image the child was forked from, so a bench that built a warehouse in its own process (a
5 GB peak at 1,000 GPUs) saw that figure as every child's peak (`scale_day_parts.json`'s 1,898.6
MiB for each of its runs is the 256-GPU build's)."""


def own_peak_command(report: Path, args: list[str]) -> list[str]:
    """`python -m gpuledger ARGS` through `OWN_PEAK`, its peak to be written to `report`."""
    report.unlink(missing_ok=True)
    return [sys.executable, "-c", OWN_PEAK, str(report), *args]


def own_peak_mib(report: Path, usage: resource.struct_rusage) -> float:
    """The peak an `own_peak_command` child wrote, in MiB; its `ru_maxrss` where it was killed
    before its end (and wrote none)."""
    own = report.read_text() if report.exists() else None
    return round(int(own or usage.ru_maxrss) / 1024, 1)


def parts_beside(folder: Path) -> Path:
    """The day parts a tree's refresh kept beside `folder`/w.duckdb: a folder of files since
    decision 0281 (`w.dayparts`), a DuckDB file before it (`w.dayparts.duckdb`)."""
    files = folder / "w.dayparts"
    return files if files.is_dir() else folder / "w.dayparts.duckdb"


def gpuledger_child(tree: Path, source: Path, work: Path, args: list[str],
                    memory_limit: str | None = None, *, day_parts: Path | None = None) -> dict[str, Any]:
    """`gpuledger ARGS` of `tree` (on `PYTHONPATH`) on a copy of the warehouse `source` at
    `work`/w.duckdb, with `warehouse.memory_limit` set to `memory_limit` in a settings file where
    given, run by `child_run` (its figures, its output left in `work`/stdout and stderr).
    `day_parts`: day parts (`parts_beside`) copied beside the copy as its own.
    The copy is first opened for writing by `tree`, untimed (`migrate_s`): a tree whose schema
    is newer than `source`'s migrates it as its first writer would, not inside the measure."""
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "w.duckdb"
    shutil.copyfile(source, copy)
    if day_parts is not None and day_parts.is_dir():
        shutil.copytree(day_parts, work / day_parts.name, dirs_exist_ok=True)
    elif day_parts is not None:
        shutil.copyfile(day_parts, work / day_parts.name)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GPULEDGER_WAREHOUSE", None)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", MIGRATE, str(copy)], cwd=work, env=env, check=True)
    migrate_s = round(time.perf_counter() - started, 1)
    config = None
    if memory_limit is not None:
        config = work / "gpuledger.yaml"
        config.write_text(f"warehouse:\n  memory_limit: {memory_limit}\n")
    return {**child_run(tree, copy, work, args, config), "migrate_s": migrate_s}


def child_run(tree: Path, warehouse: Path, work: Path, args: list[str],
              config: Path | None = None) -> dict[str, Any]:
    """`gpuledger --warehouse WAREHOUSE [--config CONFIG] ARGS` of `tree` (on `PYTHONPATH`) in
    `work`, in place, as a child reaped with `os.wait4`: `rc`, `wall_s`, user + system `cpu_s`
    and the child's own `peak_rss_mib` (`OWN_PEAK`). Its output is left in `work`/stdout and
    stderr."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("GPULEDGER_WAREHOUSE", None)
    peak_report = work / "peak_kib"
    cmd = own_peak_command(peak_report, ["--warehouse", str(warehouse),
                                         *(("--config", str(config)) if config else ()), *args])
    with open(work / "stdout", "wb") as out, open(work / "stderr", "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    return {"rc": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": own_peak_mib(peak_report, usage)}


def write_result(name: str, figures: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "machine": machine_facts(), **figures}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(json.dumps(payload, indent=2, default=str))
    return path


def difference(a: Any, b: Any) -> tuple[float, int]:
    """(largest relative difference of two numbers at the same place, how many other places
    differ) between two results walked side by side: a summed float's last bits move with the
    order DuckDB's threads add in, anything else must be equal."""
    if isinstance(a, float) and isinstance(b, float):
        if a == b or (math.isnan(a) and math.isnan(b)):
            return 0.0, 0
        return abs(a - b) / max(abs(a), abs(b)), 0
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        pairs = [difference(x, y) for x, y in zip(a, b, strict=True)]
    elif isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        pairs = [difference(a[k], b[k]) for k in a]
    else:
        return 0.0, int(a != b)
    return max((p[0] for p in pairs), default=0.0), sum(p[1] for p in pairs)
