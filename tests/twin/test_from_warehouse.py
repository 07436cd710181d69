"""A replay window rebuilt from a real DuckDB warehouse: queues, flavors, nodes, pods and pending
samples by hand.

Window [S, S + 30 min). ClusterQueues cq-a (flavor f: 2 GPUs, then flavor g: 7 `mig-1g.10gb`) and
cq-b (f: 2 GPUs), cohort lab; LocalQueue `lq` in ns-a -> cq-a and in ns-b -> cq-b. ResourceFlavor f
is stored with nodeLabels pool=f; the inventory has nodes n (pool=f, 4 GPUs), k (pool=f, 2 GPUs)
and o (pool=other): f gets n and k. g is not stored: one node of the quotas' 7 instances, labelled
FLAVOR_LABEL=g. Both queues also list flavor h (4 GPUs, stored, node hn) whose Kueue usage is 0 in
every sample of the window. Pods: p7 ran on hn (skipped: not Kueue's); p1 (ns-a, 2 GPUs, on n) runs S+0..S+10; p2 (ns-a, 1 GPU, on n) runs S+5..S+8
and cq-a reports 1 pending workload at minutes 2, 3, 4; q1 (ns-b, 2 GPUs, on k) runs S+4..S+9 and
cq-b reports 1 pending at minutes 0-3 (it was waiting when the window opened); p3 asks a MIG slice
on a node outside the inventory (kept, unpinned); p6 asks a GPU and a slice (skipped); p4 names a
LocalQueue nobody defined (not read); p0 (on n) ran S-5..S+1, so it arrives at 0 with 1 minute
left; p5 ran S-10..S-2, before the window (not read).
Arrivals by hand (arrived by t = started by t + pending at t, FIFO): p1 is cq-a's second start and
nothing pended before it -> 0; p2 is the third: at minute 2, 2 started + 1 pending = 3 -> 2; p3 is
the fourth and starts at 6, after the last pending sample -> 6; q1: at minute 0, 0 started + 1
pending = 1 -> 0.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.core.frames import NODES, PODS, QUEUE_SAMPLES, QUEUES, polars_schema
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse
from tools.twin.flavors import Flavor, FlavorQuota
from tools.twin.from_warehouse import FLAVOR_LABEL, window_from_warehouse
from tools.twin.replay import QueueSpec, WorkloadSpec
from tools.twin_build.builder import TwinBuildError

S = datetime(2026, 3, 1, tzinfo=UTC)
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


def _minutes(m: float) -> datetime:
    return S + timedelta(minutes=m)


def _cq(name: str, mig: bool, preemption: dict | None = None, weight: str | None = None) -> dict:
    groups = [{"coveredResources": [GPU], "flavors": [{"name": "f", "resources": [{"name": GPU, "nominalQuota": 2}]},
                                                      {"name": "h", "resources": [{"name": GPU, "nominalQuota": 4}]}]}]
    if mig:
        groups.append({"coveredResources": [MIG], "flavors": [{"name": "g", "resources": [
            {"name": MIG, "nominalQuota": 7}]}]})
    spec = {"cohortName": "lab", "resourceGroups": groups} | ({"preemption": preemption} if preemption else {}) | (
        {"fairSharing": {"weight": weight}} if weight else {})
    return {"kind": "ClusterQueue", "name": name, "namespace": "", "cohort": "lab", "spec": json.dumps(spec),
            "resource_version": "1", "observed_at": S}


def _lq(namespace: str, cq: str) -> dict:
    return {"kind": "LocalQueue", "name": "lq", "namespace": namespace, "cohort": None,
            "spec": json.dumps({"clusterQueue": cq}), "resource_version": "1", "observed_at": S}


def _node(name: str, pool: str, gpus: int) -> dict:
    return {"node": name, "pool": pool, "labels": json.dumps({"pool": pool, "kubernetes.io/hostname": name}),
            "allocatable": json.dumps({"cpu": "8", GPU: str(gpus), MIG: "0"}), "observed_at": S}


def _pod(ns: str, name: str, requests: dict, start: float, end: float, *, queue: str = "lq",
         node: str = "n") -> dict:
    return {"namespace": ns, "pod": name, "node": node, "queue": queue, "owner_kind": "Job", "owner_name": name,
            "gpu_requests": json.dumps(requests), "labels": "{}", "start_ts": _minutes(start),
            "end_ts": _minutes(end)}


@pytest.fixture
def wh(tmp_path):
    flavor, other = ({"kind": "ResourceFlavor", "name": n, "namespace": "", "cohort": None,
                      "spec": json.dumps({"nodeLabels": {"pool": n}}), "resource_version": "1", "observed_at": S}
                     for n in "fh")
    reclaims = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    queues = pl.DataFrame([_cq("cq-a", True), _cq("cq-b", False, reclaims, weight="1500m"), _lq("ns-a", "cq-a"), _lq("ns-b", "cq-b"),
                           flavor, other],
                          schema=polars_schema(QUEUES))
    nodes = pl.DataFrame([_node("n", "f", 4), _node("k", "f", 2), _node("o", "other", 8), _node("hn", "h", 8)], schema=polars_schema(NODES))
    pods = pl.DataFrame([
        _pod("ns-a", "p5", {GPU: 1}, -10, -2), _pod("ns-a", "p0", {GPU: 1}, -5, 1),
        _pod("ns-a", "p1", {GPU: 2}, 0, 10),
        _pod("ns-a", "p2", {GPU: 1}, 5, 8), _pod("ns-b", "q1", {GPU: 2}, 4, 9, node="k"),
        _pod("ns-a", "p3", {MIG: 1}, 6, 7, node="elsewhere"), _pod("ns-a", "p4", {GPU: 1}, 7, 9, queue="nope"),
        _pod("ns-a", "p6", {GPU: 1, MIG: 1}, 7, 8), _pod("ns-a", "p7", {GPU: 1}, 7, 8, node="hn"),
    ], schema=polars_schema(PODS))
    pending = {"cq-a": {2, 3, 4}, "cq-b": {0, 1, 2, 3}}
    rows = [{"ts": _minutes(m), "cluster_queue": q, "flavor": f, "resource": GPU, "nominal_quota": 2.0,
             "usage": 2.0 if f == "f" else 0.0, "pending_workloads": float(m in pending[q]), "admission_wait_s": None}
            for m in range(30) for q in pending for f in "fh"]
    samples = pl.DataFrame(rows, schema=polars_schema(QUEUE_SAMPLES))
    with Warehouse.open(tmp_path / "wh.duckdb") as w:
        w.load(LoadBatch(frames={"queues": queues, "pods": pods, "nodes": nodes}))
        w.load(LoadBatch(frames={"queue_samples": samples}, window=Window(S, S + timedelta(hours=1))))
        yield w


def test_window_from_the_warehouse_infers_fifo_arrivals(wh) -> None:
    got = window_from_warehouse(wh, S, _minutes(30))
    short = window_from_warehouse(wh, S, _minutes(6))  # p1 stops at the window's end: 6 minutes
    assert {w.name: w.run_min for w in short.window.workloads}["w00001-p1"] == 6.0
    # p6 (two resources) and p7 (on flavor h, whose Kueue usage is 0 all window: not Kueue's);
    # p4's LocalQueue is not stored, so it is not read at all
    assert got.skipped == 2
    f2, h4, g7 = FlavorQuota("f", GPU, 2), FlavorQuota("h", GPU, 4), FlavorQuota("g", MIG, 7)
    assert got.window.queues == (QueueSpec("cq-a", 6, "lab", quotas=(f2, h4, g7)),  # preemption as stored
                                 QueueSpec("cq-b", 6, "lab", reclaim_within_cohort="Any",
                                           within_cluster_queue="LowerPriority", quotas=(f2, h4), weight=1.5))
    assert got.window.flavors == (Flavor("f", {"pool": "f"}, ({GPU: 2}, {GPU: 4})),  # k, n: nodes by name
                                  Flavor("h", {"pool": "h"}, ({GPU: 8},)), Flavor("g", {FLAVOR_LABEL: "g"}, ({MIG: 7},)))
    assert sorted(got.window.workloads, key=lambda w: w.name) == [
        WorkloadSpec("w00000-p0", 0.0, 1, "cq-a", 1.0, flavor="f"),
        WorkloadSpec("w00001-p1", 0.0, 2, "cq-a", 10.0, flavor="f"),
        WorkloadSpec("w00002-q1", 0.0, 2, "cq-b", 5.0, flavor="f"), WorkloadSpec("w00003-p2", 2.0, 1, "cq-a", 3.0, flavor="f"),
        WorkloadSpec("w00004-p3", 6.0, 1, "cq-a", 1.0, resource=MIG)]


def test_an_empty_window_is_one_line(wh) -> None:
    with pytest.raises(TwinBuildError, match="no pod with whole GPUs or MIG instances ran") as caught:
        window_from_warehouse(wh, _minutes(100), _minutes(130))
    assert "\n" not in str(caught.value)
