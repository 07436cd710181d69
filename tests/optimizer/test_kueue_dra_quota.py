"""Kueue DRA quota resources (`queues.kueue_dra_resources`, decision 0113) are planned like GPUs.

Cases:
- a ClusterQueue declaring a mapped DRA resource (Kueue's `deviceClassMappings` name) and
  `nvidia.com/gpu` yields quota specs for both; unmapped, the DRA resource is left out like cpu;
- from a queues file and a history CSV, the plan moves the DRA quota towards the queue whose
  DRA demand is higher (checked against the demand written here, not the planner's numbers),
  keeps the cohort's DRA capacity, leaves cpu untouched and carries the new DRA nominalQuota
  in the rewritten resourceGroups;
- collector → warehouse → optimizer: Kueue's usage/quota series for the DRA resource (a
  Prometheus answer parsed by the real parser) land in `queue_samples` and come back as that
  resource's demand, with its quota spec, from a real DuckDB warehouse;
- the setting refuses names that are not Kubernetes resource names, and repeats.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
import yaml
from pydantic import ValidationError

from gpuledger.collectors import kueue_metrics
from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import parse_matrix
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.queues import queue_collector
from gpuledger.core.config import Settings
from gpuledger.core.config_queues import QueueSettings
from gpuledger.core.frames import QUEUES, polars_schema
from gpuledger.core.window import Window
from gpuledger.optimizer.plan.contract import QuotaChanges
from gpuledger.optimizer.quota.inputs import load_quota_inputs, quota_inputs_from_warehouse
from gpuledger.optimizer.quota.planner import QuotaOptions, plan_quota
from gpuledger.optimizer.quota.queues.kueue import queue_from_object
from gpuledger.optimizer.quota.spec import GPU
from gpuledger.warehouse import LoadBatch, Warehouse

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


def _answer(values: dict[str, float]) -> bytes:
    """A Prometheus matrix answer: one series per resource of `big`, ten minutes of one value."""
    result = [{"metric": {"cluster_queue": "big", "flavor": "h100", "resource": r},
               "values": [[(START + timedelta(minutes=m)).timestamp(), str(v)] for m in range(10)]}
              for r, v in values.items()]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def test_dra_usage_flows_from_kueue_metrics_to_the_planner(tmp_path):
    window = Window(START, START + timedelta(minutes=10), timedelta(minutes=1))
    matrices = {
        "usage": parse_matrix(_answer({DRA: 3, GPU: 1, "cpu": 8}), kueue_metrics.LABELS, "usage"),
        "nominal_quota": parse_matrix(_answer({DRA: 4, GPU: 4, "cpu": 64}), kueue_metrics.LABELS, "nq"),
    }
    quality = Quality()
    samples = queue_collector().queue_samples(matrices, Chunk(window), NOW, quality)
    assert quality.total == 0
    assert set(samples.filter(pl.col("resource") == DRA)["usage"].to_list()) == {3.0}
    collector = queue_collector()
    kind = next(r for r in collector.resources if r.kind == "ClusterQueue")
    row = collector.row(kind, cluster_queue("big"), START)
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(LoadBatch(frames={"queues": pl.DataFrame([row], schema=polars_schema(QUEUES))}))
        wh.load(LoadBatch(frames={"queue_samples": samples}, window=window))
        inputs = quota_inputs_from_warehouse(wh, timedelta(hours=1), dra=(DRA,))
        plain = quota_inputs_from_warehouse(wh, timedelta(hours=1))
    assert set(inputs.queues[0].quotas) == {("h100", GPU), ("h100", DRA)}
    assert set(plain.queues[0].quotas) == {("h100", GPU)}
    dra = inputs.history.filter(pl.col("resource") == DRA)
    # ten one-minute samples, summed by the warehouse into two 5-minute buckets
    assert dra.height == 2 and set(dra["demand"].to_list()) == {3.0}  # usage, nothing pending
    assert inputs.capacity[("c", "h100", DRA)] == 4


@pytest.mark.parametrize("names", [("not a name",), (DRA, DRA), ("/gpu",)])
def test_bad_dra_names_are_refused(names):
    with pytest.raises(ValidationError, match=r"queues\.kueue_dra_resources"):
        QueueSettings(kueue_dra_resources=names)
    assert QueueSettings(kueue_dra_resources=(DRA, "whole-gpus")).kueue_dra_resources == (DRA, "whole-gpus")
