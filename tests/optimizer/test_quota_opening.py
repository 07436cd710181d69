"""A replay starts from what the history recorded running at its first bucket (decision 0251).

Kueue does not preempt admitted work to give a queue its nominal back unless the queue reclaims
(`reclaimWithinCohort`), so who holds a cohort's GPUs when a window opens decides who waits in it.
Each figure below is worked out by hand:
- a, b nominal 2 in a cohort of 4, each asking 4 for three 5-minute steps. From nothing running
  each gets its own nominal first: 2 pending per queue per step, 30 GPU-minutes each. From the
  record (a runs 4, b nothing) a keeps its 4: b pends 4 per step, 60; a 0. Were b reclaiming, it
  takes its nominal back at once: 30 each again.
- the grid keeps what ran beside the demand through `window` and `coarsen`, and a bucket's
  opening never exceeds its demand;
- the warehouse's `queue_samples.usage` is what ran.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpuledger.core.frames import QUEUE_SAMPLES, QUEUES, polars_schema
from gpuledger.core.window import Window
from gpuledger.optimizer.quota.demand import demand_of
from gpuledger.optimizer.quota.inputs import QuotaInputs, quota_inputs_from_warehouse
from gpuledger.optimizer.quota.queues.kueue import queue_from_object
from gpuledger.optimizer.quota.replay import replay
from gpuledger.optimizer.quota.spec import GPU, Quota, default_capacity
from gpuledger.warehouse import LoadBatch, Warehouse

START = datetime(2026, 10, 5, tzinfo=UTC)
STEP = timedelta(minutes=5)


def _history(demand: dict[str, list[float]], running: dict[str, list[float]] | None) -> pl.DataFrame:
    steps = len(next(iter(demand.values())))
    frame = pl.DataFrame({"ts": [START + i * STEP for i in range(steps)] * len(demand),
                          "cluster_queue": [n for n in demand for _ in range(steps)], "flavor": "f",
                          "resource": GPU, "demand": [v for n in demand for v in demand[n]]})
    if running is not None:
        frame = frame.with_columns(running=pl.Series([v for n in demand for v in running[n]]))
    return frame


def _cohort(reclaiming: str | None = None) -> tuple[tuple, dict]:
    def queue(name: str):
        spec = {"cohortName": "c", "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "f", "resources": [{"name": GPU, "nominalQuota": 2}]}]}]}
        q = queue_from_object({"metadata": {"name": name}, "spec": spec}, "t")
        return replace(q, reclaims=name == reclaiming)

    queues = (queue("a"), queue("b"))
    return queues, {(q.name, "f", GPU): Quota(2.0) for q in queues}


@pytest.mark.parametrize(("running", "reclaiming", "expected"), [
    (None, None, {"a": 30.0, "b": 30.0}),
    ({"a": [4.0, 4.0, 4.0], "b": [0.0, 0.0, 0.0]}, None, {"a": 0.0, "b": 60.0}),
    ({"a": [4.0, 4.0, 4.0], "b": [0.0, 0.0, 0.0]}, "b", {"a": 30.0, "b": 30.0}),
])
def test_who_ran_when_the_window_opens_keeps_running(running, reclaiming, expected):
    queues, quotas = _cohort(reclaiming)
    history = _history({"a": [4.0] * 3, "b": [4.0] * 3}, running)
    inputs = QuotaInputs(queues, default_capacity(queues), history, STEP)
    assert replay(inputs, quotas).per_queue_pending == pytest.approx(expected)


def test_a_held_out_window_opens_on_its_own_first_bucket():
    # the record: a holds the cohort for the first two steps, b from the third on. A window cut at
    # the third step starts from b running 4: a pends 4 per step there (two steps: 40), b none.
    queues, quotas = _cohort()
    history = _history({"a": [4.0] * 4, "b": [4.0] * 4},
                       {"a": [4.0, 4.0, 0.0, 0.0], "b": [0.0, 0.0, 4.0, 4.0]})
    inputs = QuotaInputs(queues, default_capacity(queues), history, STEP)
    held_out = inputs.demand.window(START + 2 * STEP)
    assert replay(inputs, quotas, history=held_out).per_queue_pending == pytest.approx({"a": 40.0, "b": 0.0})


def test_the_grid_keeps_what_ran_through_windows_and_coarsening():
    grid = demand_of(_history({"a": [4.0, 2.0, 3.0, 1.0]}, {"a": [3.0, 2.0, 5.0, 1.0]}), STEP)
    assert grid.opening is not None and grid.opening.tolist() == [3.0]
    assert grid.window(START + 2 * STEP).opening.tolist() == [3.0]   # 5 recorded, capped at demand 3
    coarse = grid.coarsen(2 * STEP)
    assert coarse.running is not None and coarse.running[:, 0].tolist() == [2.5, 3.0]
    assert demand_of(_history({"a": [4.0]}, None), STEP).opening is None


def test_the_warehouse_usage_is_what_ran(tmp_path):
    cq = {"cohortName": "all", "resourceGroups": [{"coveredResources": [GPU], "flavors": [
        {"name": "f", "resources": [{"name": GPU, "nominalQuota": 4}]}]}]}
    queues = pl.DataFrame([{"kind": "ClusterQueue", "name": name, "namespace": "", "cohort": "all",
                            "spec": json.dumps(cq), "resource_version": "1", "observed_at": START}
                           for name in ("cq-a", "cq-b")], schema=polars_schema(QUEUES))
    usage = {"cq-a": [6.0, 4.0, 4.0], "cq-b": [2.0, 3.0, 1.0]}
    samples = pl.DataFrame([{"ts": START + i * STEP, "cluster_queue": q, "flavor": "f", "resource": GPU,
                             "nominal_quota": 4.0, "usage": usage[q][i], "pending_workloads": 1.0,
                             "admission_wait_s": None} for i in range(3) for q in usage],
                           schema=polars_schema(QUEUE_SAMPLES))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(LoadBatch(frames={"queues": queues}))
        wh.load(LoadBatch(frames={"queue_samples": samples}, window=Window(START, START + timedelta(hours=1))))
        inputs = quota_inputs_from_warehouse(wh, timedelta(days=1))
    grid = inputs.demand
    assert grid.running is not None
    for name, used in usage.items():
        i = grid.index((name, "f", GPU))
        assert i is not None
        assert np.allclose(grid.running[:, i], used)
        assert np.allclose(grid.values[:, i], np.array(used) + 1.0)   # one pending pod of 1 GPU (no pods: size 1)
