"""A twin window from a demand history without workloads (tools/twin/from_demand.py), worked
out by hand: one-GPU workloads per GPU of each bucket's level, pinned to the series' flavor;
nodes carrying each flavor's capacity; the busiest window found where demand exceeds what the
quotas let run, with and without the cohort."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from gpuledger.optimizer.quota.inputs import QuotaInputs, check_history
from gpuledger.optimizer.quota.queues.kueue import queue_from_object
from gpuledger.optimizer.quota.spec import GPU, default_capacity
from tools.twin.flavors import FlavorQuota
from tools.twin.from_demand import busiest_start, window_from_demand
from tools.twin.from_warehouse import FLAVOR_LABEL
from tools.twin.replay import WorkloadSpec

START = datetime(2026, 10, 5, tzinfo=UTC)
STEP = timedelta(minutes=15)


def _inputs() -> QuotaInputs:
    def queue(name: str, nominal: int):
        spec = {"cohortName": "all", "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "f", "resources": [{"name": GPU, "nominalQuota": nominal, "borrowingLimit": 3}]}]}]}
        return queue_from_object({"metadata": {"name": name}, "spec": spec}, "t")

    queues = (queue("a", 10), queue("b", 3))
    a = [2.2, 3.6, 1.0, 0.0, 9.0]
    b = [0.0, 0.0, 0.0, 5.0, 5.4]
    frame = pl.DataFrame({"ts": [START + i * STEP for i in range(5)] * 2, "cluster_queue": ["a"] * 5 + ["b"] * 5,
                          "flavor": "f", "resource": GPU, "demand": a + b})
    history, step = check_history(frame, "t")
    return QuotaInputs(queues, default_capacity(queues), history, step)


def test_levels_become_one_gpu_workloads_pinned_to_their_flavor():
    window = window_from_demand(_inputs(), START, 45)
    a = sorted((w for w in window.workloads if w.queue == "a"), key=lambda w: w.name)
    # a's levels: 2 (minutes 0-14), 4 (15-29), 1 (30-44): GPU 0 all 45 minutes, GPU 1 until 30,
    # GPUs 2 and 3 from 15 to 30
    assert [(w.arrival_min, w.run_min) for w in a] == [(0.0, 45.0), (0.0, 30.0), (15.0, 15.0), (15.0, 15.0)]
    assert all(w.gpus == 1 and w.flavor == "f" and w.resource == GPU for w in a)
    assert not [w for w in window.workloads if w.queue == "b"]  # b asks nothing in these 45 minutes
    (flavor,) = window.flavors
    assert flavor.node_labels == {FLAVOR_LABEL: "f"}
    assert [dict(n) for n in flavor.nodes] == [{GPU: 8}, {GPU: 5}]  # capacity 10 + 3 in nodes of 8
    assert [(q.name, q.cohort, q.quotas) for q in window.queues] == [
        ("a", "all", (FlavorQuota("f", GPU, 10, 3),)), ("b", "all", (FlavorQuota("f", GPU, 3, 3),))]
    window.check()


def test_without_borrowing_each_queue_stands_alone():
    window = window_from_demand(_inputs(), START + 3 * STEP, 30, borrowing=False)
    assert [(q.cohort, q.quotas) for q in window.queues] == [(None, (FlavorQuota("f", GPU, 10),)),
                                                            (None, (FlavorQuota("f", GPU, 3),))]
    b = sorted((w for w in window.workloads if w.queue == "b"), key=lambda w: w.name)
    assert b == [WorkloadSpec(f"b-f-g{k}-m0", 0.0, 1, "b", 30.0, flavor="f") for k in range(5)]


def test_the_busiest_window_is_where_demand_exceeds_what_may_run():
    inputs = _inputs()
    # with the cohort (capacity 13): only bucket 4 is over (9 + 5.4 = 14.4); alone, b is over its
    # 3 in buckets 3 and 4 (2 + 2.4) and a never over its 10: the 30-minute windows starting at 3
    assert busiest_start(inputs, 15, borrowing=True) == START + 4 * STEP
    assert busiest_start(inputs, 30, borrowing=False) == START + 3 * STEP
