"""The quota replay admits whole workloads (decision 0249): each case worked out by hand below.

Cases:
- a 2-GPU workload offered the 1 GPU its cohort has free waits whole (the fluid replay ran half
  of it: the twin's measured gap of decision 0235);
- what a queue's next unit cannot use is offered to the others: a 1-GPU queue takes the GPU a
  2-GPU queue could not (Kueue admits the workload that needs no borrowing first);
- hard quotas run whole units of the nominal; all a queue still wants is admitted when it fits,
  even below one unit (a bucket's mean of a workload that ended part way);
- queues without a unit replay exactly as before;
- the units come from the pods each queue ran: the smallest request per pod and resource,
  through LocalQueues on a real warehouse, HAMi's memory and core shares not counted.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpuledger.core.frames import PODS, QUEUE_SAMPLES, QUEUES, polars_schema
from gpuledger.core.window import Window
from gpuledger.optimizer.quota.inputs import QuotaInputs, check_history, quota_inputs_from_warehouse
from gpuledger.optimizer.quota.queues import request_sizes
from gpuledger.optimizer.quota.queues.kueue import queue_from_object
from gpuledger.optimizer.quota.queues.volcano import planned
from gpuledger.optimizer.quota.replay import replay
from gpuledger.optimizer.quota.spec import GPU, Quota, default_capacity
from gpuledger.warehouse import LoadBatch, Warehouse

START = datetime(2026, 10, 5, tzinfo=UTC)
STEP = timedelta(minutes=5)
MIG = "nvidia.com/mig-1g.10gb"


def _inputs(nominal: dict[str, int], demand: dict[str, list[float]], units: dict[str, float],
            cohort: str | None = "c") -> tuple[QuotaInputs, dict]:
    def queue(name: str):
        spec = {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "f", "resources": [{"name": GPU, "nominalQuota": nominal[name]}]}]}]}
        if cohort:
            spec["cohortName"] = cohort
        q = queue_from_object({"metadata": {"name": name}, "spec": spec}, "t")
        return replace(q, units={GPU: units[name]} if name in units else {})

    queues = tuple(queue(n) for n in nominal)
    steps = len(next(iter(demand.values())))
    frame = pl.DataFrame({"ts": [START + i * STEP for i in range(steps)] * len(demand),
                          "cluster_queue": [n for n in demand for _ in range(steps)], "flavor": "f",
                          "resource": GPU, "demand": [v for n in demand for v in demand[n]]})
    history, step = check_history(frame, "t")
    quotas = {(n, "f", GPU): Quota(float(v)) for n, v in nominal.items()}
    return QuotaInputs(queues, default_capacity(queues), history, step), quotas


@pytest.mark.parametrize(("units", "b_pending", "idle"), [({}, 5.0, 5.0), ({"b": 2.0}, 10.0, 10.0)])
def test_a_workload_larger_than_the_free_quota_waits_whole(units, b_pending, idle):
    # a, b nominal 2 in one cohort of 4. Step 1: a runs 3 (borrowing 1 of b's idle 2): 1 idle.
    # Step 2: b asks 2 and 1 is free (a keeps its 3, no preemption). Fluid: b runs 1 and pends 1.
    # With b's workloads 2 GPUs each: b runs nothing and pends 2, and the free GPU idles.
    inputs, quotas = _inputs({"a": 2, "b": 2}, {"a": [3.0, 3.0], "b": [0.0, 2.0]}, units)
    result = replay(inputs, quotas)
    assert result.per_queue_pending == pytest.approx({"a": 0.0, "b": b_pending})
    assert result.idle_quota_gpu_minutes == pytest.approx(idle)


def test_what_one_queue_cannot_use_is_offered_to_the_others():
    # Cohort of 3 (a, b, c nominal 1 each); c runs 1 throughout. Step 2: a asks 2 in 2-GPU
    # workloads, b asks 2 in 1-GPU workloads; 2 are free. Each gets its own 1 first; a cannot use
    # it (its workload needs 2), so b takes its own and then borrows a's: b runs 2, a runs 0.
    # (Kueue: b's 1-GPU workloads need no borrowing, so they are admitted before a's; then a's
    # needs 2 of the 1 left.) Fluid: a and b run 1 each and pend 1 each.
    demand = {"a": [0.0, 2.0], "b": [0.0, 2.0], "c": [1.0, 1.0]}
    whole, fluid = (_inputs({"a": 1, "b": 1, "c": 1}, demand, units)
                    for units in ({"a": 2.0, "b": 1.0}, {}))
    assert replay(*whole).per_queue_pending == pytest.approx({"a": 10.0, "b": 0.0, "c": 0.0})
    assert replay(*fluid).per_queue_pending == pytest.approx({"a": 5.0, "b": 5.0, "c": 0.0})


def test_hard_quotas_run_whole_units_and_a_remainder_that_fits_is_admitted():
    # No cohort, nominal 3, 2-GPU workloads. Step 1 asks 4: runs 2 (a third GPU holds no
    # workload), pends 2. Step 2 asks 1 (a bucket's mean: a workload that ended part way): fits,
    # runs 1. Step 3 asks 3.5: runs 2, pends 1.5. Idle: 1 + 2 + 1 per step.
    inputs, quotas = _inputs({"a": 3}, {"a": [4.0, 1.0, 3.5]}, {"a": 2.0}, cohort=None)
    for borrowing in (True, False):
        result = replay(inputs, quotas, borrowing=borrowing)
        assert result.per_queue_pending == pytest.approx({"a": (2 + 0 + 1.5) * 5})
        assert result.idle_quota_gpu_minutes == pytest.approx((1 + 2 + 1) * 5)
    fluid, _ = _inputs({"a": 3}, {"a": [4.0, 1.0, 3.5]}, {}, cohort=None)
    assert replay(fluid, quotas).per_queue_pending == pytest.approx({"a": (1 + 0 + 0.5) * 5})


def test_request_sizes_smallest_per_resource_and_mean_per_pod():
    rows = [("q", json.dumps({GPU: 2}), 3), ("q", json.dumps({GPU: 4}), 1),
            ("q", json.dumps({MIG: 1, "nvidia.com/gpumem": 4000}), 2), ("q", json.dumps({GPU: True}), 5),
            ("q", json.dumps({GPU: 0}), 7), (None, json.dumps({GPU: 1}), 1), ("r", "{}", 1)]
    sizes = request_sizes(rows, planned)
    assert sizes.smallest == {"q": {GPU: 2.0, MIG: 1.0}}
    assert sizes.mean == {"q": pytest.approx((2 * 3 + 4 + 1 * 2) / 6)}  # gpumem is not a count


def test_units_are_read_from_the_pods_each_cluster_queue_ran(tmp_path):
    at = START

    def obj(kind: str, name: str, namespace: str = "", spec: dict | None = None) -> dict:
        return {"kind": kind, "name": name, "namespace": namespace, "cohort": None, "spec": json.dumps(spec or {}),
                "resource_version": "1", "observed_at": at}

    cq = {"cohortName": "all", "resourceGroups": [{"coveredResources": [GPU, MIG], "flavors": [
        {"name": "f", "resources": [{"name": GPU, "nominalQuota": 4}, {"name": MIG, "nominalQuota": 7}]}]}]}
    queues = pl.DataFrame([obj("ClusterQueue", "cq-a", spec=cq), obj("ClusterQueue", "cq-b", spec=cq),
                           obj("LocalQueue", "lq", "ns-a", {"clusterQueue": "cq-a"}),
                           obj("LocalQueue", "lq", "ns-b", {"clusterQueue": "cq-b"})], schema=polars_schema(QUEUES))

    def pod(ns: str, name: str, requests: dict, queue: str = "lq") -> dict:
        return {"namespace": ns, "pod": name, "node": "n", "queue": queue, "owner_kind": "Job", "owner_name": name,
                "gpu_requests": json.dumps(requests), "labels": "{}", "start_ts": at, "end_ts": at + STEP}

    pods = pl.DataFrame([pod("ns-a", "p1", {GPU: 4}), pod("ns-a", "p2", {GPU: 2, MIG: 3}),
                         pod("ns-a", "p3", {MIG: 2}), pod("ns-a", "p4", {GPU: 1}, queue="not-stored"),
                         pod("ns-b", "q1", {GPU: 8})], schema=polars_schema(PODS))
    samples = pl.DataFrame([{"ts": at + i * STEP, "cluster_queue": q, "flavor": "f", "resource": GPU,
                             "nominal_quota": 4.0, "usage": 1.0, "pending_workloads": 0.0, "admission_wait_s": None}
                            for i in range(3) for q in ("cq-a", "cq-b")], schema=polars_schema(QUEUE_SAMPLES))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(LoadBatch(frames={"queues": queues, "pods": pods}))
        wh.load(LoadBatch(frames={"queue_samples": samples}, window=Window(at, at + timedelta(hours=1))))
        inputs = quota_inputs_from_warehouse(wh, timedelta(days=1))
    assert {q.name: dict(q.units) for q in inputs.queues} == {"cq-a": {GPU: 2.0, MIG: 2.0}, "cq-b": {GPU: 8.0}}


@pytest.mark.parametrize("system", ["kueue", "volcano"])
def test_a_pod_stored_in_two_incarnations_is_one_pod_of_its_queue(tmp_path, system):
    # p1 (4 GPUs) is stored twice: a gap in collection broke its series, so `pods` keeps two
    # rows of the name (warehouse.queries.pods). p2 asks 2 GPUs. Per pod the queue's mean
    # request is (4 + 2) / 2 = 3; counted by row it was (4 + 4 + 2) / 3.
    from gpuledger.optimizer.quota.queues import quota_reader

    at = START
    kind, queue_name, queue = (("LocalQueue", "lq", "cq-a") if system == "kueue" else ("Queue", "team-q", "team-q"))
    spec = {"clusterQueue": "cq-a"} if system == "kueue" else {}
    queues = pl.DataFrame([{"kind": kind, "name": queue_name, "namespace": "ns-a" if system == "kueue" else "",
                            "cohort": None, "spec": json.dumps(spec), "resource_version": "1", "observed_at": at}],
                          schema=polars_schema(QUEUES))

    def pod(name: str, gpus: int, start: datetime) -> dict:
        return {"namespace": "ns-a", "pod": name, "node": "n", "queue": queue_name, "owner_kind": "Job",
                "owner_name": name, "gpu_requests": json.dumps({GPU: gpus}), "labels": "{}",
                "start_ts": start, "end_ts": start + STEP}

    pods = pl.DataFrame([pod("p1", 4, at), pod("p1", 4, at + 3 * STEP), pod("p2", 2, at)], schema=polars_schema(PODS))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(LoadBatch(frames={"queues": queues, "pods": pods}))
        assert wh.scalar("SELECT count(*) FROM pods WHERE pod = 'p1'") == 2, "two incarnations kept"
        sizes = quota_reader(system).request_sizes(wh)
    assert sizes.mean == {queue: pytest.approx(3.0)}
    assert sizes.smallest == {queue: {GPU: 2.0}}
