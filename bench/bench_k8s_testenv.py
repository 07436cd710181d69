"""Benchmark of the Kubernetes test environment: cache check, server start, CRD install.

Ours vs baseline in the same run, each on a fresh cluster started without CRDs:
- CRD install, ours: libyaml parsing + 4 creates in flight, then wait for Established;
- CRD install, baseline: pure-Python YAML parsing + one create at a time (the obvious way).
Also: the cached `build` check and the time to a ready etcd + kube-apiserver. The machine is
shared, so the load average is recorded next to the figures.

Run: `python -m bench.bench_k8s_testenv` (needs `python -m tools.k8s_testenv build` first);
writes bench/results/k8s_testenv.json.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import timed, write_result
from tools.k8s_testenv.builder import build, is_cached
from tools.k8s_testenv.cluster import LocalCluster
from tools.k8s_testenv.crds import install_crds
from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import Layout, default_cache_root


def crd_install(layout: Layout, *, workers: int, libyaml: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(layout, Path(tmp), install_crds=False)
        with cluster:
            with cluster.api_client() as api:
                names, seconds = timed(
                    lambda: install_crds(api, layout.crds, workers=workers, libyaml=libyaml))
            return {"servers_ready_s": round(cluster.start_seconds, 2), "crds": len(names),
                    "crd_install_s": round(seconds, 2), "load_avg_1m": os.getloadavg()[0]}


def main() -> None:
    layout = Layout(default_cache_root())
    if not is_cached(layout):
        raise K8sTestEnvError("bench: run `python -m tools.k8s_testenv build` first")
    result, check_s = timed(lambda: build(layout))
    assert result.cached
    ours = crd_install(layout, workers=4, libyaml=True)
    time.sleep(2)
    baseline = crd_install(layout, workers=1, libyaml=False)
    write_result("k8s_testenv", {
        "kubernetes": layout.kubernetes, "etcd": layout.etcd, "kueue": layout.kueue,
        "cached_build_check_s": round(check_s, 4),
        "ours_parallel_libyaml": ours,
        "baseline_sequential_pure_python_yaml": baseline,
        "crd_install_speedup": round(baseline["crd_install_s"] / max(ours["crd_install_s"], 1e-6), 2),
    })


if __name__ == "__main__":
    main()
