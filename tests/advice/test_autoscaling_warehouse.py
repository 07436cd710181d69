"""Autoscaling advice read from a warehouse file: a diurnal Deployment with vLLM queue gauges.

Seeded 2 days, one sample a minute: Deployment `chat` (ReplicaSet `chat-7c9d8f6b5d`, label
`pod-template-hash: 7c9d8f6b5d`) holds 12 whole cards all day; load L(t) = 2 + 6 max(0,
sin(pi (h - 6) / 12)) busy replicas, so each pod's activity is L / 12, and each pod reports
`vllm:num_requests_waiting` 2u^2/(1-u) (u = L / 12) through `token_samples`.

Cases:
- the series is read per Deployment (hash dropped), with the queue summed over the replicas;
- the proposal saves at least a third of the 576 recorded GPU-hours and stays over the queue
  target in at most 2% of minutes; `recommend --kind autoscaling` reports it.
"""

from __future__ import annotations

import math
from datetime import timedelta

import polars as pl
import pytest

from gpuledger.analytics.advice.run import autoscaling_proposals
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import T0, Seg, at, gpus, load, namespaces, pods, samples, window

HOURS = 48
PODS = 12


def _load(minute: int) -> float:
    hour = (minute % 1440) / 60
    return 2 + 6 * max(0.0, math.sin(math.pi * (hour - 6) / 12))


def _frames() -> dict:
    segs, tokens = [], []
    for m in range(HOURS * 60):
        u = _load(m) / PODS
        for i in range(PODS):
            segs.append(Seg(f"GPU-{i}", at(minutes=m), at(minutes=m + 1), "serve", f"chat-7c9d8f6b5d-p{i}",
                            act=u, node=f"n{i // 8}"))
            tokens.append({"ts": T0 + timedelta(minutes=m), "namespace": "serve", "pod": f"chat-7c9d8f6b5d-p{i}",
                           "model_name": "llama", "prompt_tokens_total": None, "generation_tokens_total": None,
                           "num_requests_waiting": 2 * u * u / (1 - u), "num_requests_running": 8 * u})
    return {
        "gpus": gpus(*({"uuid": f"GPU-{i}", "node": f"n{i // 8}", "gpu_index": i % 8, "pool": "serving"}
                       for i in range(PODS))),
        "namespaces": namespaces({"serve": "web"}),
        "pods": pods(*({"namespace": "serve", "pod": f"chat-7c9d8f6b5d-p{i}", "node": f"n{i // 8}",
                        "owner_kind": "ReplicaSet", "owner_name": "chat-7c9d8f6b5d",
                        "labels": '{"pod-template-hash": "7c9d8f6b5d"}'} for i in range(PODS))),
        "gpu_samples": samples(segs),
        "token_samples": pl.DataFrame(tokens, schema=polars_schema(TABLES["token_samples"])),
    }


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory):
    return load(tmp_path_factory.mktemp("as") / "as.duckdb", window(HOURS), _frames())


def test_proposal_from_the_warehouse(path) -> None:
    with Warehouse.open(path, read_only=True) as wh:
        (p,) = autoscaling_proposals(wh, window(HOURS), Settings())
    assert (p.namespace, p.deployment) == ("serve", "chat")
    assert p.gpu_hours_recorded == pytest.approx(PODS * HOURS)
    assert p.gpu_hours_saved >= PODS * HOURS / 3
    assert p.over_target_share <= 0.02
    assert p.minimum_by_hour[3] == math.ceil(2 / 0.8) and p.max_replicas == PODS


def test_queue_gauges_summed_per_deployment_minute(path) -> None:
    from gpuledger.warehouse.queries.advice import serving_minutes

    with Warehouse.open(path, read_only=True) as wh:
        series = serving_minutes(wh, at(12), at(12, minutes=3), "gr_engine_active")
    u = _load(12 * 60) / PODS
    assert series["deployment"].to_list() == ["chat"] * 3
    assert series["replicas"].to_list() == [PODS] * 3
    assert series["queue"][0] == pytest.approx(PODS * 2 * u * u / (1 - u))
    assert series["running"][0] == pytest.approx(PODS * 8 * u)


def test_recommend_kind_autoscaling_reports_it(path, tmp_path) -> None:
    from tests.advice.test_cli_advice import _run

    doc = _run(path, tmp_path, "--kind", "autoscaling", start=at(0), end=at(HOURS))
    (row,) = doc["recommendations"]
    assert (row["kind"], row["scope"]) == ("autoscaling", "serve/chat")
    (dep,) = doc["autoscaling"]["deployments"]
    assert dep["manifest"]["kind"] == "HorizontalPodAutoscaler" and dep["gpu_hours_saved"] >= PODS * HOURS / 3
