"""A replay window rebuilt from a real DuckDB warehouse: queues, pods and pending samples by hand.

Window [S, S + 30 min). ClusterQueues cq-a and cq-b (nominal 2 each, cohort lab), LocalQueue `lq`
in ns-a -> cq-a and in ns-b -> cq-b. Pods: p1 (ns-a, 2 GPUs) runs S+0..S+10; p2 (ns-a, 1 GPU) runs
S+5..S+8 and cq-a reports 1 pending workload at minutes 2, 3, 4; q1 (ns-b, 2 GPUs) runs S+4..S+9
and cq-b reports 1 pending at minutes 0-3 (it was waiting when the window opened); p3 asks a MIG
slice (skipped) and p4 names a LocalQueue nobody defined (not read); p0 ran S-5..S+1, so it
arrives at 0 with 1 minute left; p5 ran S-10..S-2, before the window (not read).
Arrivals by hand (arrived by t = started by t + pending at t, FIFO): p1 is cq-a's second start and
nothing pended before it -> 0; p2 is the third: at minute 2, 2 started + 1 pending = 3 -> 2;
q1: at minute 0, 0 started + 1 pending = 1 -> 0.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.core.frames import PODS, QUEUE_SAMPLES, QUEUES, polars_schema
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse
from tools.twin.from_warehouse import window_from_warehouse
from tools.twin.replay import QueueSpec, WorkloadSpec
from tools.twin_build.builder import TwinBuildError

S = datetime(2026, 3, 1, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def _minutes(m: float) -> datetime:
    return S + timedelta(minutes=m)


def _cq(name: str) -> dict:
    spec = {"cohortName": "lab", "resourceGroups": [{"coveredResources": [GPU], "flavors": [
        {"name": "f", "resources": [{"name": GPU, "nominalQuota": 2}]}]}]}
    return {"kind": "ClusterQueue", "name": name, "namespace": "", "cohort": "lab", "spec": json.dumps(spec),
            "resource_version": "1", "observed_at": S}


def _lq(namespace: str, cq: str) -> dict:
    return {"kind": "LocalQueue", "name": "lq", "namespace": namespace, "cohort": None,
            "spec": json.dumps({"clusterQueue": cq}), "resource_version": "1", "observed_at": S}


def _pod(ns: str, name: str, requests: dict, start: float, end: float, *, queue: str = "lq") -> dict:
    return {"namespace": ns, "pod": name, "node": "n", "queue": queue, "owner_kind": "Job", "owner_name": name,
            "gpu_requests": json.dumps(requests), "labels": "{}", "start_ts": _minutes(start),
            "end_ts": _minutes(end)}


@pytest.fixture
def wh(tmp_path):
    queues = pl.DataFrame([_cq("cq-a"), _cq("cq-b"), _lq("ns-a", "cq-a"), _lq("ns-b", "cq-b")],
                          schema=polars_schema(QUEUES))
    pods = pl.DataFrame([
        _pod("ns-a", "p5", {GPU: 1}, -10, -2), _pod("ns-a", "p0", {GPU: 1}, -5, 1),
        _pod("ns-a", "p1", {GPU: 2}, 0, 10),
        _pod("ns-a", "p2", {GPU: 1}, 5, 8), _pod("ns-b", "q1", {GPU: 2}, 4, 9),
        _pod("ns-a", "p3", {"nvidia.com/mig-1g.10gb": 1}, 6, 7), _pod("ns-a", "p4", {GPU: 1}, 7, 9, queue="nope"),
    ], schema=polars_schema(PODS))
    pending = {"cq-a": {2, 3, 4}, "cq-b": {0, 1, 2, 3}}
    rows = [{"ts": _minutes(m), "cluster_queue": q, "flavor": "f", "resource": GPU, "nominal_quota": 2.0,
             "usage": 0.0, "pending_workloads": float(m in pending[q]), "admission_wait_s": None}
            for m in range(30) for q in pending]
    samples = pl.DataFrame(rows, schema=polars_schema(QUEUE_SAMPLES))
    with Warehouse.open(tmp_path / "wh.duckdb") as w:
        w.load(LoadBatch(frames={"queues": queues, "pods": pods}))
        w.load(LoadBatch(frames={"queue_samples": samples}, window=Window(S, S + timedelta(hours=1))))
        yield w


def test_window_from_the_warehouse_infers_fifo_arrivals(wh) -> None:
    got = window_from_warehouse(wh, S, _minutes(30))
    short = window_from_warehouse(wh, S, _minutes(6))  # p1 stops at the window's end: 6 minutes
    assert {w.name: w.run_min for w in short.window.workloads}["w00001-p1"] == 6.0
    assert got.skipped == 1  # p3 (MIG); p4's LocalQueue is not stored, so it is not read at all
    assert got.window.queues == (QueueSpec("cq-a", 2, "lab"), QueueSpec("cq-b", 2, "lab"))
    assert got.window.nodes == (4,)
    assert sorted(got.window.workloads, key=lambda w: w.name) == [
        WorkloadSpec("w00000-p0", 0.0, 1, "cq-a", 1.0), WorkloadSpec("w00001-p1", 0.0, 2, "cq-a", 10.0),
        WorkloadSpec("w00002-q1", 0.0, 2, "cq-b", 5.0), WorkloadSpec("w00003-p2", 2.0, 1, "cq-a", 3.0)]


def test_an_empty_window_is_one_line(wh) -> None:
    with pytest.raises(TwinBuildError, match="no pod with whole GPUs ran") as caught:
        window_from_warehouse(wh, _minutes(100), _minutes(130))
    assert "\n" not in str(caught.value)
