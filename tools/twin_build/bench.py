"""`python -m tools.twin_build bench`: what the twin's build costs, into bench/results/twin_build.json.

Recorded per part: its first build on this machine (the stamp the cached binary came with: Go's
build cache then held kube-apiserver's packages, not the part's own), a forced warm rebuild (every
package in the Go build cache) and a cached call (the stamp check alone); wall and CPU seconds,
with the load average around each. Baseline, in the same run at the same load: a warm rebuild of
kube-apiserver from the test environment's own wrapper module (copied; its cache is only read),
and that cache's recorded first-build time.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from tools.k8s_testenv.builder import find_go, version_ldflags
from tools.k8s_testenv.versions import APISERVER_PACKAGE
from tools.k8s_testenv.versions import Layout as TestEnvLayout
from tools.k8s_testenv.versions import default_cache_root as testenv_cache_root
from tools.twin_build.builder import TwinBuildError, _children_cpu, _run_go, build, is_cached
from tools.twin_build.versions import PARTS, Layout


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _machine(go: str) -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "python": platform.python_version(),
            "go": _run_go_version(go)}


def _run_go_version(go: str) -> str:
    return subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip()


def _apiserver_warm(layout: Layout, go: str) -> dict[str, Any]:
    """Rebuild kube-apiserver (warm) from a copy of the test env's wrapper module, output discarded."""
    testenv = TestEnvLayout(testenv_cache_root())
    source = testenv.src / "kube-apiserver"
    if not (source / "go.mod").is_file():
        return {"skipped": f"{source} has no go.mod (the test environment is not built here)"}
    work = layout.dir / "src" / "bench-kube-apiserver"
    work.mkdir(parents=True, exist_ok=True)
    for name in ("go.mod", "go.sum"):
        shutil.copyfile(source / name, work / name)
    out = work / "kube-apiserver.discard"
    load0, wall0, cpu0 = _load(), time.monotonic(), _children_cpu()
    with layout.log.open("a") as log:
        ldflags = version_ldflags(testenv.kubernetes)
        proc = _run_go(go, ["build", "-mod=mod", "-trimpath", "-ldflags", ldflags, "-o", str(out),
                            APISERVER_PACKAGE], work, log)
    result = {"wall_s": round(time.monotonic() - wall0, 1), "cpu_s": round(_children_cpu() - cpu0, 1),
              "load_before": load0, "load_after": _load(), "ok": proc.returncode == 0}
    out.unlink(missing_ok=True)
    stamp = testenv.stamp
    if stamp.is_file():
        result["first_build_recorded"] = json.loads(stamp.read_text()).get("timings", {})
    return result


def run_bench(layout: Layout, out: Path) -> dict[str, Any]:
    """Measure every cached part; refuse (one line) if a part is not built yet."""
    missing = [p for p in PARTS.values() if not is_cached(layout, p)]
    if missing:
        raise TwinBuildError(f"twin-build bench: build first ({', '.join(p.name for p in missing)} missing)")
    go = find_go()
    report: dict[str, Any] = {"machine": _machine(go), "load_average_start": _load(), "parts": {}}
    for part in PARTS.values():
        first = json.loads(layout.stamp(part).read_text())
        load0 = _load()
        [warm] = build(layout, [part.name], echo=lambda _s: None, force=True)
        warm_entry = {"wall_s": round(warm.wall_s, 1), "cpu_s": round(warm.cpu_s, 1),
                      "load_before": load0, "load_after": _load()}
        [cached] = build(layout, [part.name], echo=lambda _s: None)
        report["parts"][part.name] = {
            "module": f"{part.module}@{first['version']}",
            "bytes": first["bytes"],
            "first_build": first.get("first_build") or {k: first[k] for k in ("wall_s", "cpu_s", "built_at")},
            "warm_rebuild": warm_entry,
            "cached_check_s": round(cached.wall_s, 3),
        }
    report["baseline_kube_apiserver"] = _apiserver_warm(layout, go)
    report["load_average_end"] = _load()
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.rename(out)
    return report
