"""`bench.bench_warehouse`'s roll-up by other code in a fresh process: main's pass (the code of
`--main-ref`) and ours the same way, so the two compare like for like; and the bench's one line
per way on stdout."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpuledger.core.window import Window

_MAIN_CHILD = """
import json, sys, time
from datetime import datetime
from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
window = Window(datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3]))
best = {"wall": float("inf"), "cpu": float("inf")}
with Warehouse.open(sys.argv[1], read_only=True) as wh:
    for _ in range(2):  # warm like ours, which the parent process has run before
        wall, cpu = time.perf_counter(), time.process_time()
        frames = rollup_batch(wh, window, Settings()).frames  # one signature in every tree
        best["wall"] = min(best["wall"], time.perf_counter() - wall)
        best["cpu"] = min(best["cpu"], time.process_time() - cpu)
print(json.dumps({**best, "rows": {k: v.height for k, v in frames.items()}}))
"""


def main_pass(tree: Path | None, path: Path, window: Window) -> dict[str, Any] | None:
    """The roll-up by the code of `tree` on the same file, in a fresh child process (its own
    imports; wall and CPU of the roll-up's frames alone, read-only beside ours): main's pass, and ours
    the same way (`ours_fresh`), so the two compare like for like (the parent process simulated,
    loaded and ran the SQL pass before its own `ours`)."""
    if tree is None:
        return None
    env = {**os.environ, "PYTHONPATH": str(tree)}
    path = _readable_by(tree, env, path)
    args = [sys.executable, "-c", _MAIN_CHILD, str(path), window.start.isoformat(), window.end.isoformat()]
    # cwd too: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH.
    out = subprocess.run(args, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _readable_by(tree: Path, env: dict[str, str], path: Path) -> Path:
    """`path`, or a copy whose recorded schema version is the one `tree`'s code expects when ours
    is newer (a reader refuses a newer file; the roll-up reads only tables both versions have:
    the samples and the inventory)."""
    import shutil

    import duckdb

    latest = "from gpuledger.warehouse.schema import LATEST; print(LATEST)"
    theirs = int(subprocess.run([sys.executable, "-c", latest], env=env, cwd=tree, capture_output=True,
                                text=True, check=True).stdout.strip())
    from gpuledger.warehouse.schema import LATEST as ours  # the file is ours (the bench wrote it)

    if ours <= theirs:
        return path
    copy = path.with_name(path.stem + f".v{theirs}.duckdb")
    if not copy.exists():
        shutil.copyfile(path, copy)
        con = duckdb.connect(str(copy))
        con.execute("DELETE FROM schema_version WHERE version > ?", [theirs])
        con.close()
    return copy


def main_ref_tree(args: argparse.Namespace) -> Path | None:
    """The product code of `--main-ref` (git archive, cached), or None with `--main-ref ''`."""
    from bench.bill_compare import before_tree

    return before_tree(Path(args.cache), args.main_ref) if args.main_ref else None


def say(rolled: dict[str, Any]) -> None:
    """One line per way on stdout: wall and CPU seconds (the lead re-measures from these)."""
    for way in ("floor", "before_0122", "main", "ours_fresh", "ours"):
        if f"{way}_s" in rolled:
            print(f"roll-up {rolled['hours']} h, {way:12s} {rolled[f'{way}_s']:6.2f} s wall "
                  f"{rolled[f'{way}_cpu_s']:6.2f} CPU-s")
