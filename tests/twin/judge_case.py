"""The tiny plan and window the judge's tests use (tests/twin/test_judge*.py), with what Kueue's
documented semantics give for it, computed here.

One ClusterQueue cq-a, no cohort, flavor f (ResourceFlavor with nodeLabels pool=f; inventory node n,
pool=f, 4 GPUs), quota 1 GPU today; the plan raises it to 2. Three Jobs of 1 GPU through LocalQueue
lq in ns-a (simulated minutes):

    job  arrives  runs
    p1   0        4
    p2   1        3
    p3   2        2

Kueue (BestEffortFIFO, preemption Never, no cohort): a workload is admitted when its ClusterQueue's
usage plus its request stays within nominal; waiting ones are admitted oldest first when quota frees
(`walk`). Under 1 GPU: p1 at 0, p2 at 4 (p1 done), p3 at 7 (p2 done); p2 waits 3 minutes, p3 5:
8 GPU-minutes. Under 2 GPUs: p1 at 0, p2 at 1, p3 at 4 (p1 done): 2 GPU-minutes. The warehouse
records what ran under today's quota (`walk(1)`): each pod's start and end, and the ClusterQueue's
pending count each minute, from which `from_warehouse` infers the arrivals back.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from gpuledger.core.frames import NODES, PODS, QUEUE_SAMPLES, QUEUES, polars_schema
from gpuledger.core.window import Window as LoadWindow
from gpuledger.optimizer.plan.contract import (
    ClusterQueueUpdate,
    Effect,
    Plan,
    QuotaChange,
    QuotaChanges,
    SolverInfo,
)
from gpuledger.optimizer.plan.store import save_plan
from gpuledger.warehouse import LoadBatch, Warehouse
from tools.twin.record import JobFacts, Seen, summarize
from tools.twin.replay import ReplayResult, Window

S = datetime(2026, 3, 1, tzinfo=UTC)
GPU = "nvidia.com/gpu"
MINUTES = 12
JOBS = (("p1", 0, 4), ("p2", 1, 3), ("p3", 2, 2))  # name, arrival minute, run minutes (1 GPU each)
TODAY, PLANNED = 1, 2
PLAN_ID = "quota-20260302-000000-twin01"


def walk(nominal: int) -> tuple[list[tuple[int, str, str]], dict[int, int]]:
    """Events (minute, what, job) in order, and the pending count after each minute's admissions."""
    arrivals = {name: arrive for name, arrive, _ in JOBS}
    runs = {name: run for name, _, run in JOBS}
    running: dict[str, int] = {}
    waiting: list[str] = []
    events: list[tuple[int, str, str]] = []
    pending: dict[int, int] = {}
    for minute in range(MINUTES):
        for name in sorted(n for n, end in running.items() if end == minute):
            del running[name]
            events.append((minute, "finished", name))
        for name in [n for n, at in arrivals.items() if at == minute]:
            waiting.append(name)
            events.append((minute, "created", name))
        for name in list(waiting):  # oldest first
            if len(running) + 1 <= nominal:
                waiting.remove(name)
                running[name] = minute + runs[name]
                events.append((minute, "admitted", name))
            elif (minute, "pending", name) not in events and arrivals[name] == minute:
                events.append((minute, "pending", name))
        pending[minute] = len(waiting)
    return events, pending


def expected(nominal: int) -> tuple[list[str], set[str], float]:
    """Admission order, the jobs that waited, and pending GPU-minutes under `nominal`."""
    events, pending = walk(nominal)
    order = [job for _, what, job in events if what == "admitted"]
    waited = {job for _, what, job in events if what == "pending"}
    return order, waited, float(sum(pending.values()))


def _rows() -> dict[str, pl.DataFrame]:
    events, pending = walk(TODAY)
    start = {job: m for m, what, job in events if what == "admitted"}
    end = {job: m for m, what, job in events if what == "finished"}
    at = lambda m: S + timedelta(minutes=m)  # noqa: E731
    obj = {"namespace": "", "cohort": None, "resource_version": "1", "observed_at": S}
    cq = {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
        {"name": "f", "resources": [{"name": GPU, "nominalQuota": TODAY}]}]}]}
    queues = [{**obj, "kind": "ClusterQueue", "name": "cq-a", "spec": json.dumps(cq)},
              {**obj, "kind": "LocalQueue", "name": "lq", "namespace": "ns-a",
               "spec": json.dumps({"clusterQueue": "cq-a"})},
              {**obj, "kind": "ResourceFlavor", "name": "f", "spec": json.dumps({"nodeLabels": {"pool": "f"}})}]
    nodes = [{"node": "n", "pool": "f", "labels": json.dumps({"pool": "f"}),
              "allocatable": json.dumps({"cpu": "8", GPU: "4"}), "observed_at": S}]
    pods = [{"namespace": "ns-a", "pod": job, "node": "n", "queue": "lq", "owner_kind": "Job", "owner_name": job,
             "gpu_requests": json.dumps({GPU: 1}), "labels": "{}", "start_ts": at(start[job]),
             "end_ts": at(end[job])} for job, _, _ in JOBS]
    usage = {m: sum(1 for j in start if start[j] <= m < end[j]) for m in range(MINUTES)}
    samples = [{"ts": at(m), "cluster_queue": "cq-a", "flavor": "f", "resource": GPU, "nominal_quota": float(TODAY),
                "usage": float(usage[m]), "pending_workloads": float(pending[m]), "admission_wait_s": None}
               for m in range(MINUTES)]
    return {"queues": pl.DataFrame(queues, schema=polars_schema(QUEUES)),
            "nodes": pl.DataFrame(nodes, schema=polars_schema(NODES)),
            "pods": pl.DataFrame(pods, schema=polars_schema(PODS)),
            "queue_samples": pl.DataFrame(samples, schema=polars_schema(QUEUE_SAMPLES))}


def plan() -> Plan:
    groups = ({"coveredResources": [GPU], "flavors": [{"name": "f", "resources": [
        {"name": GPU, "nominalQuota": PLANNED}]}]},)
    change = QuotaChange(cluster_queue="cq-a", flavor="f", resource=GPU, old_nominal=TODAY, new_nominal=PLANNED)
    return Plan(id=PLAN_ID, kind="quota", created_at=S + timedelta(days=1), fingerprint="fp-twin-case",
                changes=QuotaChanges(quotas=(change,), cluster_queues=(
                    ClusterQueueUpdate(name="cq-a", resource_version="1", resource_groups=groups),)),
                effect=Effect(pending_gpu_minutes_before=8.0, pending_gpu_minutes_after=2.0),
                solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=5))


def build_warehouse(path: Path) -> Plan:
    """The case's warehouse at `path` with the plan stored as proposed."""
    frames = _rows()
    samples = frames.pop("queue_samples")
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=frames))
        wh.load(LoadBatch(frames={"queue_samples": samples}, window=LoadWindow(S, S + timedelta(hours=1))))
        save_plan(wh, plan(), now=S + timedelta(days=1))
    return plan()


def semantic_runner(window: Window, seconds_per_minute: float, minutes: int) -> ReplayResult:
    """A stand-in for the twin in the unit tests only: the events `walk` gives under the window's
    quota, as the recorder would have watched them (t0 = 0)."""
    (queue,) = window.queues
    events, _ = walk(queue.quotas[0].nominal)
    seen = [Seen(what, job, m * seconds_per_minute) for m, what, job in events if what != "created"]
    names = {w.name.split("-")[-1]: w.name for w in window.workloads}
    seen = [Seen(s.what, names[s.job], s.at) for s in seen]
    jobs = {names[job]: JobFacts(queue.name, 1, m * seconds_per_minute)
            for m, what, job in events if what == "created"}
    end = minutes * seconds_per_minute
    per_queue = summarize(seen, jobs, {queue.name: queue.nominal_gpus}, t0=0.0, end=end,
                          seconds_per_minute=seconds_per_minute)
    return ReplayResult(per_queue, seen, seconds_per_minute, 0.0, True, jobs, end)
