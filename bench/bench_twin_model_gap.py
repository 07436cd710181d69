"""The quota model's error against the scheduling twin, per queue, on two tiny windows (issue 36 step 3).

Each window is replayed on the twin (real Kueue v0.17.0 + kube-scheduler + Job controller, KWOK
nodes; tools/twin/replay.py), and the demand series the twin produced (admitted + pending GPUs per
minute, as the collector would sample it) is replayed through the product's fluid quota model
(`gpuledger.optimizer.quota.replay`); tools/twin/model_gap.py compares pending GPU-minutes per queue.
- borrow: ClusterQueues a, b (nominal 2 each, one cohort), 5 Jobs, two borrowing admissions,
  preemption Never (the case of tests/twin/test_replay.py);
- reclaim: the same queues with `reclaimWithinCohort: Any`; b reclaims the quota a borrowed.
The machine is shared: the load average is recorded beside the figures; the twin's minutes carry
the control loops' latency (decision 0234).

Run: `nice python -m bench.bench_twin_model_gap` (needs `python -m tools.twin_build build`);
writes bench/results/twin_model_gap.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import write_result
from tools.k8s_testenv.pytest_plugin import running_cluster
from tools.twin.harness import Twin, missing_parts
from tools.twin.model_gap import compare
from tools.twin.replay import QueueSpec, Window, WorkloadSpec, replay, timed_stages
from tools.twin_build.versions import Layout, default_cache_root

SECONDS_PER_MINUTE = 10.0
WINDOWS: dict[str, tuple[str, tuple[tuple[str, str, int, float, float, int], ...]]] = {
    # name: (reclaimWithinCohort, jobs: name, queue, gpus, arrival minute, run minutes, priority)
    "borrow": ("Never", (("a1", "a", 1, 0, 7, 0), ("a2", "a", 2, 1, 4, 0), ("b1", "b", 2, 2, 4, 0),
                         ("b2", "b", 1, 3, 5, 0), ("a3", "a", 2, 6, 2, 0))),
    "reclaim": ("Any", (("a1", "a", 2, 0, 8, 100), ("a2", "a", 2, 1, 6, 0), ("b1", "b", 2, 2, 2, 0))),
}


def _window(reclaim: str, jobs: tuple[tuple[str, str, int, float, float, int], ...], ns: str) -> Window:
    return Window(
        queues=tuple(QueueSpec(f"{q}-{ns}", 2, cohort=f"lab-{ns}", reclaim_within_cohort=reclaim)
                     for q in "ab"),
        nodes=(4,),
        workloads=tuple(WorkloadSpec(n, arrive, gpus, f"{q}-{ns}", run, priority=p)
                        for n, q, gpus, arrive, run, p in jobs))


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.bench_twin_model_gap", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    layout = Layout(default_cache_root())
    missing = missing_parts(layout, ("kube-scheduler", "kube-controller-manager", "kwok", "kueue"))
    if missing:
        print(f"bench_twin_model_gap: build first: python -m tools.twin_build build ({', '.join(missing)})",
              file=sys.stderr)
        return 1
    from kubernetes import client

    figures: dict[str, Any] = {"seconds_per_simulated_minute": SECONDS_PER_MINUTE,
                               "load_average_start": list(os.getloadavg()), "windows": {}}
    with tempfile.TemporaryDirectory() as tmp, running_cluster(Path(tmp) / "cluster") as cluster:
        twin = Twin(cluster, layout, Path(tmp) / "twin", stages=timed_stages(layout))
        with twin:
            twin.start_job_controller()
            twin.start_kueue()
            for name, (reclaim, jobs) in WINDOWS.items():
                ns = f"gap-{name}"
                with cluster.api_client() as api:
                    client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
                window = _window(reclaim, jobs, ns)
                result = replay(twin, window, ns, seconds_per_minute=SECONDS_PER_MINUTE)
                per_queue = compare(result, window)
                figures["windows"][name] = {
                    "reclaim_within_cohort": reclaim, "finished": result.finished,
                    "admission_order": result.order("admitted"), "preempted": result.order("preempted"),
                    "per_queue": {q.removesuffix(f"-{ns}"): v for q, v in per_queue.items()},
                    "replay_wall_s": result.timings.get("replay_s"),
                    "load_average_after": list(os.getloadavg()),
                }
    write_result("twin_model_gap", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
