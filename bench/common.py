"""Shared helpers for benchmarks: machine facts, peak memory, timing, latency figures, a baseline
tree, writing results."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
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


def write_result(name: str, figures: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "machine": machine_facts(), **figures}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(json.dumps(payload, indent=2, default=str))
    return path
