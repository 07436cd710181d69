"""Kueue DRA quota resources (`queues.kueue_dra_resources`, decision 0113) are planned like GPUs.

Cases:
- a ClusterQueue declaring a mapped DRA resource (Kueue's `deviceClassMappings` name) and
  `nvidia.com/gpu` yields quota specs for both; unmapped, the DRA resource is left out like cpu;
- from a queues file and a history CSV, the plan moves the DRA quota towards the queue whose
  DRA demand is higher (checked against the demand written here, not the planner's numbers),
  keeps the cohort's DRA capacity, leaves cpu untouched and carries the new DRA nominalQuota
  in the rewritten resourceGroups;
- the setting refuses names that are not Kubernetes resource names, and repeats.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
import yaml
from pydantic import ValidationError

from gpuledger.core.config import Settings
from gpuledger.core.config_queues import QueueSettings
from gpuledger.optimizer.plan import QuotaChanges
from gpuledger.optimizer.queues.kueue import queue_from_object
from gpuledger.optimizer.quota import QuotaOptions, plan_quota
from gpuledger.optimizer.quota_input import load_quota_inputs
from gpuledger.optimizer.quota_spec import GPU

DRA = "gpu.example.com"
START = datetime(2026, 10, 5, tzinfo=UTC)
NOW = datetime(2026, 11, 2, tzinfo=UTC)
DEMAND = {("big", DRA): 7.0, ("small", DRA): 1.0, ("big", GPU): 2.0, ("small", GPU): 2.0}
"""Mean demand per (queue, resource); the DRA quota is split 4/4 today, so `big` is short."""


def cluster_queue(name: str) -> dict:
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": {
        "cohortName": "c", "resourceGroups": [{
            "coveredResources": ["cpu", GPU, DRA],
            "flavors": [{"name": "h100", "resources": [
                {"name": "cpu", "nominalQuota": "64"},
                {"name": GPU, "nominalQuota": 4},
                {"name": DRA, "nominalQuota": 4},
            ]}],
        }],
    }}


def test_mapped_dra_resource_is_a_quota_spec_beside_the_gpu():
    planned = queue_from_object(cluster_queue("big"), "t", (DRA,))
    assert set(planned.quotas) == {("h100", GPU), ("h100", DRA)}
    assert planned.quotas[("h100", DRA)].nominal == 4
    assert set(queue_from_object(cluster_queue("big"), "t").quotas) == {("h100", GPU)}


def test_plan_moves_dra_quota_to_the_queue_that_needs_it(tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(yaml.safe_dump({"clusterQueues": [cluster_queue("big"), cluster_queue("small")]}))
    ts = [START + timedelta(hours=h) for h in range(28 * 24)]
    rows = [
        {"ts": t, "cluster_queue": q, "flavor": "h100", "resource": r,
         "demand": round(mean * (1 + 0.2 * math.sin(2 * math.pi * t.hour / 24)), 3)}
        for (q, r), mean in DEMAND.items() for t in ts
    ]
    history = tmp_path / "history.csv"
    pl.DataFrame(rows).write_csv(history)
    inputs = load_quota_inputs(queues, history, dra=(DRA,))
    assert inputs.capacity[("c", "h100", DRA)] == 8
    plan = plan_quota(inputs, QuotaOptions(time_limit_s=20), Settings(), NOW)
    assert isinstance(plan.changes, QuotaChanges)
    dra = {q.cluster_queue: q for q in plan.changes.quotas if q.resource == DRA}
    assert set(dra) == {"big", "small"}
    assert dra["big"].old_nominal == dra["small"].old_nominal == 4
    assert dra["big"].new_nominal > dra["small"].new_nominal
    assert dra["big"].new_nominal > 4 > dra["small"].new_nominal  # big's mean demand is 7
    # the backtest counts the DRA shortfall: big's DRA demand (5.6 to 8.4) always tops its quota
    # of 4 by 3 on average (the hourly sine averages 0); the GPUs and small never run short
    assert plan.evaluation is not None and plan.evaluation.verdict == "propose"
    minutes = plan.evaluation.held_out_days * 24 * 60
    assert plan.evaluation.pending_before == pytest.approx(3.0 * minutes, rel=1e-3)
    assert dra["big"].new_nominal + dra["small"].new_nominal <= 8
    assert not any(q.resource == "cpu" for q in plan.changes.quotas)
    update = {u.name: u for u in plan.changes.cluster_queues}["big"]
    written = {r["name"]: r for r in update.resource_groups[0]["flavors"][0]["resources"]}
    assert written[DRA]["nominalQuota"] == dra["big"].new_nominal
    assert written["cpu"] == {"name": "cpu", "nominalQuota": "64"}


@pytest.mark.parametrize("names", [("not a name",), (DRA, DRA), ("/gpu",)])
def test_bad_dra_names_are_refused(names):
    with pytest.raises(ValidationError, match=r"queues\.kueue_dra_resources"):
        QueueSettings(kueue_dra_resources=names)
    assert QueueSettings(kueue_dra_resources=(DRA, "whole-gpus")).kueue_dra_resources == (DRA, "whole-gpus")
