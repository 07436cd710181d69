"""A shared card's holders and a Deployment's replicas count pods, and a pod is its namespace and
name (`warehouse.queries.advice`): two pods named `worker-0` in namespaces `a` and `b` on one
time-sliced card are two holders (a distinct count of names made them one), and two replicas
of one Deployment seen on two cards are two replicas with a GPU each, for every minute; a
replica's GPUs are its cards, whatever the devices and scrapes on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.core.config import Settings
from gpuledger.core.rules import SamplingRules
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import advice as queries
from tests.analytics.builders import Seg, at, gpus, load, namespaces, pods, samples, window


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = [Seg("GPU-T", at(0), at(1), ns, "worker-0", act=0.4, vgpu=str(i), node="t1")
              for i, ns in enumerate(("a", "b"))]
    serving = [Seg(f"GPU-E{i}", at(0), at(1), "serve", f"chat-7c9d8f6b5-{i}", act=0.5, node="e1") for i in range(2)]
    frames = {
        "gpus": gpus({"uuid": "GPU-T", "node": "t1", "pool": "ts-a", "sharing_mode": "timeslice", "replicas": 4},
                     *({"uuid": f"GPU-E{i}", "node": "e1", "pool": "ex"} for i in range(2))),
        "namespaces": namespaces({"a": "alpha", "b": "beta", "serve": "web"}),
        "pods": pods(*({"namespace": ns, "pod": "worker-0", "node": "t1", "owner_kind": "Job",
                        "owner_name": "worker"} for ns in ("a", "b")),
                     *({"namespace": "serve", "pod": f"chat-7c9d8f6b5-{i}", "node": "e1",
                        "owner_kind": "ReplicaSet", "owner_name": "chat-7c9d8f6b5"} for i in range(2))),
        "gpu_samples": samples([*shared, *serving]),
    }
    return load(tmp_path_factory.mktemp("holders") / "h.duckdb", window(1), frames)


def test_same_named_pods_of_two_namespaces_are_two_holders(warehouse: Path) -> None:
    activity = SamplingRules.of(Settings()).activity
    with Warehouse.open(warehouse, read_only=True) as wh:
        minutes = queries.shared_card_minutes(wh, at(0), at(1), activity)
        levels = queries.shared_card_levels(wh, at(0), at(1), activity)
    assert minutes.height == 60 and set(minutes["holders"]) == {2}
    assert levels.select("holders", "minutes").rows() == [(2, 60)]


def test_each_replica_counts_once(warehouse: Path) -> None:
    activity = SamplingRules.of(Settings()).activity
    with Warehouse.open(warehouse, read_only=True) as wh:
        minutes = queries.serving_minutes(wh, at(0), at(1), activity)
    assert minutes.height == 60
    assert set(minutes["deployment"].cast(str)) == {"chat"}
    assert set(minutes["replicas"]) == {2} and set(minutes["gpus_per_replica"]) == {1}


@pytest.fixture(scope="module")
def wide_replica(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One replica holding two MIG slices of card GPU-M and the whole card GPU-W, GPU-W scraped
    twice a minute (on the minute and 30 s after)."""
    pod = "wide-5d8f7c9b6-q2x7k"
    segs = [Seg("GPU-M", at(0), at(1), "serve", pod, act=0.2, gpu_i_id=1, profile="3g.40gb", node="m1"),
            Seg("GPU-M", at(0), at(1), "serve", pod, act=0.6, gpu_i_id=2, profile="3g.40gb", node="m1"),
            Seg("GPU-W", at(0), at(1), "serve", pod, act=0.7, node="m1"),
            Seg("GPU-W", at(0, minutes=0.5), at(1), "serve", pod, act=0.1, node="m1")]
    frames = {
        "gpus": gpus({"uuid": "GPU-M", "node": "m1", "pool": "mig", "sharing_mode": "mig"},
                     {"uuid": "GPU-W", "node": "m1", "pool": "mig"}),
        "namespaces": namespaces({"serve": "web"}),
        "pods": pods({"namespace": "serve", "pod": pod, "node": "m1", "owner_kind": "ReplicaSet",
                      "owner_name": "wide-5d8f7c9b6"}),
        "gpu_samples": samples(segs),
    }
    return load(tmp_path_factory.mktemp("wide") / "w.duckdb", window(1), frames)


def test_a_replicas_gpus_are_its_cards(wide_replica: Path) -> None:
    """Two slices of one card are one GPU and a second scrape of a card adds none; the minute's
    activity is the mean of all four samples in it: (0.2 + 0.6 + 0.7 + 0.1) / 4."""
    activity = SamplingRules.of(Settings()).activity
    with Warehouse.open(wide_replica, read_only=True) as wh:
        minutes = queries.serving_minutes(wh, at(0), at(1), activity)
    assert minutes.height == 60 and set(minutes["deployment"].cast(str)) == {"wide"}
    assert set(minutes["replicas"]) == {1} and set(minutes["gpus_per_replica"]) == {2}
    assert minutes["activity"].to_list() == pytest.approx([(0.2 + 0.6 + 0.7 + 0.1) / 4] * 60)
