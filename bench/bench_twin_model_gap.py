"""The quota model's error against the scheduling twin, per queue, on three tiny windows (issue 36 step 3).

Each window is replayed on the twin (real Kueue v0.17.0 + kube-scheduler + Job controller, KWOK
nodes; tools/twin/replay.py), and the demand series the twin produced (admitted + pending GPUs per
minute, as the collector would sample it) is replayed through the product's quota model
(`gpuledger.optimizer.quota.replay`); tools/twin/model_gap.py compares pending GPU-minutes per queue.
- borrow: ClusterQueues a, b (nominal 2 each, one cohort), 5 Jobs, two borrowing admissions,
  preemption Never (the case of tests/twin/test_replay.py);
- reclaim: the same queues with `reclaimWithinCohort: Any`; b reclaims the quota a borrowed;
- whole: as borrow, but every workload of b asks 2 GPUs, so the model admits b in units of 2
  (decision 0249; tests/twin/test_model_gap.py works it out by hand).
The machine is shared: the load average is recorded beside the figures; the twin's minutes carry
the control loops' latency (decision 0234).

Run: `nice python -m bench.bench_twin_model_gap` (needs `python -m tools.twin_build build`);
writes bench/results/twin_model_gap.json.

`--demo WAREHOUSE --start ISO --minutes N` instead replays N minutes of a demo warehouse
(`gpuledger demo --no-serve --out DIR`) cut by tools/twin/from_warehouse.py: its ClusterQueues with
every flavor (whole GPUs, time-sliced, vGPU slots, MIG profiles), its ResourceFlavors and inventory
nodes, its pods pinned to the flavor they ran on; the workloads running when the window opens are
settled before the clock starts (`replay(settle_at_zero=True)`), the clock stops at N minutes.
The figures go into the file's `demo_window` section (its own machine facts and load average),
leaving the other sections as they are.

`--synthetic [--no-borrowing | --fair-sharing] [--minutes N]` replays the busiest N minutes of
the synthetic quota bench (bench_optimizer's quick size: 10 teams, 3 flavors; it records demand,
not workloads) cut into one-GPU workloads by tools/twin/from_demand.py, into the
`synthetic_window` sections (`--fair-sharing`: Kueue with fair sharing on the teams' weights).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import RESULTS, machine_facts, write_result
from tools.k8s_testenv.pytest_plugin import running_cluster
from tools.twin.from_demand import busiest_start, window_from_demand
from tools.twin.from_warehouse import pending_samples, window_from_warehouse
from tools.twin.harness import GPU, Twin, missing_parts
from tools.twin.model_gap import compare
from tools.twin.replay import QueueSpec, Window, WorkloadSpec, replay, timed_stages
from tools.twin_build.versions import Layout, default_cache_root

SECONDS_PER_MINUTE = 10.0
WINDOWS: dict[str, tuple[str, tuple[tuple[str, str, int, float, float, int], ...]]] = {
    # name: (reclaimWithinCohort, jobs: name, queue, gpus, arrival minute, run minutes, priority)
    "borrow": ("Never", (("a1", "a", 1, 0, 7, 0), ("a2", "a", 2, 1, 4, 0), ("b1", "b", 2, 2, 4, 0),
                         ("b2", "b", 1, 3, 5, 0), ("a3", "a", 2, 6, 2, 0))),
    "reclaim": ("Any", (("a1", "a", 2, 0, 8, 100), ("a2", "a", 2, 1, 6, 0), ("b1", "b", 2, 2, 2, 0))),
    "whole": ("Never", (("a1", "a", 1, 0, 7, 0), ("a2", "a", 2, 1, 4, 0), ("b1", "b", 2, 2, 4, 0),
                        ("b2", "b", 2, 3, 3, 0))),
}


KEPT_SECTIONS = ("demo_window", "demo_window_no_borrowing",
                 "synthetic_window", "synthetic_window_no_borrowing", "synthetic_window_fair_sharing")
"""The file's sections written by `--demo` and `--synthetic` runs (with their own machine facts)."""
SYNTHETIC_SIZE = (10, 3, 3, 21)


def _window(reclaim: str, jobs: tuple[tuple[str, str, int, float, float, int], ...], ns: str) -> Window:
    return Window(
        queues=tuple(QueueSpec(f"{q}-{ns}", 2, cohort=f"lab-{ns}", reclaim_within_cohort=reclaim)
                     for q in "ab"),
        nodes=(4,),
        workloads=tuple(WorkloadSpec(n, arrive, gpus, f"{q}-{ns}", run, priority=p)
                        for n, q, gpus, arrive, run, p in jobs))


def _twin_windows(layout: Layout) -> dict[str, Any]:
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
    return figures


def _demo_window(layout: Layout, warehouse: Path, start: datetime, minutes: int, *,
                 borrowing: bool) -> dict[str, Any]:
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        cut = window_from_warehouse(wh, start, start + timedelta(minutes=minutes))
        samples = pending_samples(wh, start, start + timedelta(minutes=minutes))
        recorded = {q: sum(counts) for q, (_, counts) in samples.items()}
    window = cut.window
    if not borrowing:  # the plan headline's "under contention (no borrowing)": each queue alone
        window = replace(window, queues=tuple(replace(q, cohort=None) for q in window.queues))
    section: dict[str, Any] = {
        "cohorts": "as stored" if borrowing else "removed (no borrowing)",
        "recorded_pending_workload_min": {q.name: recorded.get(q.name, 0.0) for q in window.queues},
        "machine": machine_facts(), "warehouse": "gpuledger demo --no-serve (seed 7, 256 GPUs)",
        "start": start.isoformat(), "minutes": minutes, "seconds_per_simulated_minute": SECONDS_PER_MINUTE,
        "queues": len(window.queues), "workloads": len(window.workloads), "pods_skipped": cut.skipped,
        "running_or_pending_at_start": sum(1 for w in window.workloads if w.arrival_min <= 0),
        "flavors": {f.name: {"nodes": len(f.nodes), "node_labels": dict(f.node_labels)}
                    for f in window.flavors},
    }
    return _replayed(layout, window, minutes, section)


def _synthetic_window(layout: Layout, minutes: int, *, borrowing: bool, fair_sharing: bool) -> dict[str, Any]:
    """The synthetic quota bench's history (bench_optimizer's quick size) cut into a window of
    one-GPU workloads (tools/twin/from_demand.py) where demand most exceeds what may run."""
    from bench.bench_optimizer import DRIFT, drifting_inputs

    inputs = drifting_inputs(*SYNTHETIC_SIZE)
    start = busiest_start(inputs, minutes, borrowing=borrowing)
    window = window_from_demand(inputs, start, minutes, borrowing=borrowing)
    section: dict[str, Any] = {
        "cohorts": "as generated" if borrowing else "removed (no borrowing)", "machine": machine_facts(),
        "inputs": inputs.source + " (bench_optimizer --quick: teams, flavors, per team, days = "
                  f"{SYNTHETIC_SIZE}, drift {DRIFT}, seed 3)",
        "start": start.isoformat(), "minutes": minutes, "seconds_per_simulated_minute": SECONDS_PER_MINUTE,
        "queues": len(window.queues), "workloads": len(window.workloads),
        "running_or_pending_at_start": sum(1 for w in window.workloads if w.arrival_min <= 0),
        "flavors": {f.name: {"nodes": len(f.nodes), "gpus": sum(n[GPU] for n in f.nodes)}
                    for f in window.flavors},
    }
    return _replayed(layout, window, minutes, section, fair_sharing=fair_sharing)


def _replayed(layout: Layout, window: Window, minutes: int, section: dict[str, Any], *,
              fair_sharing: bool = False) -> dict[str, Any]:
    """`window` replayed on a fresh twin for `minutes` (those arriving at 0 settled first), its
    figures and the model's added to `section`; `fair_sharing`: Kueue's, on the queues' weights."""
    from kubernetes import client

    section["kueue_fair_sharing"] = fair_sharing
    section["load_average_start"] = list(os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp, running_cluster(Path(tmp) / "cluster") as cluster, \
            Twin(cluster, layout, Path(tmp) / "twin", stages=timed_stages(layout)) as twin:
        twin.start_job_controller()
        twin.start_kueue(fair_sharing=fair_sharing)
        ns = "demo-window"
        with cluster.api_client() as api:
            client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        t = time.monotonic()
        result = replay(twin, window, ns, seconds_per_minute=SECONDS_PER_MINUTE, end_min=minutes,
                        settle_at_zero=True, ready_timeout_s=600)
        section["replay_wall_s"] = round(time.monotonic() - t, 1)
        section["timings"] = result.timings
        per_queue = compare(result, window)
    section["admitted"] = len(result.jobs_with("admitted"))
    section["ever_pending"] = len(result.jobs_with("pending"))
    section["preempted"] = len(result.jobs_with("preempted"))
    section["per_queue"] = per_queue
    section["load_average_after"] = list(os.getloadavg())
    return section


def _append_section(name: str, key: str, section: dict[str, Any]) -> Path:
    """Set `section` as the `key` entry of bench/results/NAME.json, crash-safe."""
    path = RESULTS / f"{name}.json"
    payload = json.loads(path.read_text()) if path.exists() else {"benchmark": name}
    payload[key] = section
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    tmp.replace(path)
    print(json.dumps(section, indent=2, default=str))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_twin_model_gap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", type=Path, help="a demo warehouse: replay a window of it instead")
    parser.add_argument("--start", type=datetime.fromisoformat, help="the window's start (ISO, with zone)")
    parser.add_argument("--minutes", type=int, default=30, help="the window's length (default 30)")
    parser.add_argument("--synthetic", action="store_true",
                        help="replay the busiest window of the synthetic quota bench instead")
    parser.add_argument("--fair-sharing", action="store_true",
                        help="with --synthetic: Kueue with fair sharing, on the queues' weights")
    parser.add_argument("--no-borrowing", action="store_true",
                        help="replay the demo or synthetic window with each ClusterQueue out of its cohort")
    args = parser.parse_args(argv)
    layout = Layout(default_cache_root())
    missing = missing_parts(layout, ("kube-scheduler", "kube-controller-manager", "kwok", "kueue"))
    if missing:
        print(f"bench_twin_model_gap: build first: python -m tools.twin_build build ({', '.join(missing)})",
              file=sys.stderr)
        return 1
    if args.synthetic:
        key = KEPT_SECTIONS[3 if args.no_borrowing else 4 if args.fair_sharing else 2]
        _append_section("twin_model_gap", key, _synthetic_window(
            layout, args.minutes, borrowing=not args.no_borrowing, fair_sharing=args.fair_sharing))
        return 0
    if args.demo is None:  # the demo windows' sections, measured apart, stay as they are
        path = RESULTS / "twin_model_gap.json"
        kept = {k: v for k, v in (json.loads(path.read_text()) if path.exists() else {}).items()
                if k in KEPT_SECTIONS}
        write_result("twin_model_gap", _twin_windows(layout) | kept)
        return 0
    if args.start is None or args.start.tzinfo is None or not args.demo.is_file():
        print("bench_twin_model_gap: --demo needs an existing warehouse file and --start with a zone "
              "(e.g. 2026-11-21T04:00:00+00:00)", file=sys.stderr)
        return 1
    key = KEPT_SECTIONS[1] if args.no_borrowing else KEPT_SECTIONS[0]
    _append_section("twin_model_gap", key, _demo_window(layout, args.demo, args.start, args.minutes,
                                                        borrowing=not args.no_borrowing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
