"""A pod name stored twice is one holder: on a shared card, in a serving Deployment, on a MIG
instance at the last sample.

`pods` keeps one row per incarnation of a name (a StatefulSet's `llm-0` recreated, a notebook
started again: spans of one key that do not touch stay apart, `warehouse.store` rule on
intervals). The shared cards' levels (`warehouse.queries.advice.shared_card_levels`) name each
holder's owner kind and class from `pods`; joined on the name alone, a second incarnation
repeated the holder's minutes, so its tokens/s counted twice and the minute looked like one
with a holder unmeasured (more token readings than holders): the level lost its tokens/s.

The serving minutes (`serving_minutes`) joined the same way: a Deployment's pod whose name
`pods` holds twice (kube-state-metrics' series broken by a gap in collection: two spans that
do not touch) was two replicas, its queue and tokens/s twice.

The MIG instances' holders at the last sample (`warehouse.queries.mig.holders_at_last_sample`,
what the MIG plan keeps busy and what capacity-now counts as held) repeated the pod as well: a
MIG slice counted held twice.

Every such join takes one row per name from `warehouse.queries.pods.newest_incarnation` (0259): the
newest incarnation's facts, NULL where it has none (not an older incarnation's in their place).

Reference: the figures worked out by hand (two holders, each 60 tokens/s, every minute; one
replica with 3 requests waiting); each case also with the name stored once.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import advice as queries
from gpuledger.warehouse.queries import mig as mig_queries
from gpuledger.warehouse.queries import workloads as workload_queries
from tests.analytics.builders import Seg, at, gpus, load, namespaces, pods, samples, window

HOURS = 2
RATE = 60.0  # tokens/s, each holder, every minute


def _frames(incarnations: int) -> dict[str, pl.DataFrame]:
    holders = ("llm-0", "llm-1")
    segs = [Seg("GPU-T", at(), at(hours=HOURS), "serve", pod, act=0.4, vgpu=str(i))
            for i, pod in enumerate(holders)]
    tokens = [{"ts": at(minutes=m, hours=0) + timedelta(seconds=30), "namespace": "serve", "pod": pod,
               "model_name": "llama", "prompt_tokens_total": None,
               "generation_tokens_total": RATE * 60 * (m + 11), "num_requests_waiting": None,
               "num_requests_running": None}
              for m in range(-10, HOURS * 60) for pod in holders]
    pod_rows = [{"namespace": "serve", "pod": pod, "owner_kind": "StatefulSet", "owner_name": "llm",
                 "start_ts": at(minutes=-30)} for pod in holders]
    if incarnations == 2:  # llm-0 ran before, under the same name, and ended an hour before this one
        pod_rows.append({"namespace": "serve", "pod": "llm-0", "owner_kind": "StatefulSet", "owner_name": "llm",
                         "start_ts": at(days=-3), "end_ts": at(hours=-1)})
    return {
        "gpus": gpus({"uuid": "GPU-T", "pool": "ts", "sharing_mode": "timeslice", "replicas": 4}),
        "namespaces": namespaces({"serve": "web"}),
        "pods": pods(*pod_rows),
        "gpu_samples": samples(segs),
        "token_samples": pl.DataFrame(tokens, schema=polars_schema(TABLES["token_samples"])),
    }


def _levels(path: Path) -> pl.DataFrame:
    with Warehouse.open(path, read_only=True) as wh:
        return queries.shared_card_levels(wh, at(), at(hours=HOURS), "gr_engine_active")


@pytest.mark.parametrize("incarnations", [1, 2])
def test_a_reused_pod_name_is_one_holder_with_its_tokens_once(tmp_path: Path, incarnations: int) -> None:
    path = load(tmp_path / "w.duckdb", window(HOURS + 1, at(hours=-1)), _frames(incarnations))
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM pods WHERE pod = 'llm-0'") == incarnations
    levels = _levels(path)
    assert levels.height == 1, levels
    row = levels.row(0, named=True)
    minutes = HOURS * 60
    assert (row["holders"], row["minutes"], row["owner_kind"]) == (2, minutes, "StatefulSet")
    # every minute has both holders' rates: the card's tokens/s is their sum, 2 x 60
    assert row["tokens_n"] == minutes
    assert row["tokens_sum"] == pytest.approx(2 * RATE * minutes, rel=1e-9)
    assert row["activity_n"] == minutes and row["activity_sum"] == pytest.approx(0.4 * minutes, rel=1e-9)


def _serving_frames(incarnations: int) -> dict[str, pl.DataFrame]:
    pod = "vllm-7d9f8b6c5-x2x7k"
    tokens = [{"ts": at(minutes=m) + timedelta(seconds=30), "namespace": "serve", "pod": pod,
               "model_name": "llama", "prompt_tokens_total": None,
               "generation_tokens_total": RATE * 60 * (m + 11), "num_requests_waiting": 3.0,
               "num_requests_running": 5.0} for m in range(-10, HOURS * 60)]
    row = {"namespace": "serve", "pod": pod, "owner_kind": "ReplicaSet", "owner_name": "vllm-7d9f8b6c5",
           "labels": '{"pod-template-hash": "7d9f8b6c5"}'}
    spans = [(at(minutes=-30), at(days=40))] + ([(at(days=-2), at(hours=-1))] if incarnations == 2 else [])
    return {
        "gpus": gpus({"uuid": "GPU-S"}),
        "namespaces": namespaces({"serve": "web"}),
        "pods": pods(*({**row, "start_ts": lo, "end_ts": hi} for lo, hi in spans)),
        "gpu_samples": samples([Seg("GPU-S", at(), at(hours=HOURS), "serve", pod, act=0.7)]),
        "token_samples": pl.DataFrame(tokens, schema=polars_schema(TABLES["token_samples"])),
    }


@pytest.mark.parametrize("incarnations", [1, 2])
def test_a_serving_pod_stored_twice_is_one_replica(tmp_path: Path, incarnations: int) -> None:
    path = load(tmp_path / "w.duckdb", window(HOURS + 1, at(hours=-1)), _serving_frames(incarnations))
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM pods") == incarnations
        minutes = queries.serving_minutes(wh, at(), at(hours=HOURS), "gr_engine_active")
    assert minutes.height == HOURS * 60
    assert set(minutes["deployment"]) == {"vllm"}
    assert set(minutes["replicas"]) == {1} and set(minutes["gpus_per_replica"]) == {1}
    assert set(minutes["queue"]) == {3.0} and set(minutes["running"]) == {5.0}
    assert minutes["tokens_per_s"].to_list() == pytest.approx([RATE] * (HOURS * 60), rel=1e-9)


@pytest.mark.parametrize("incarnations", [1, 2])
def test_a_mig_holder_stored_twice_is_held_once(tmp_path: Path, incarnations: int) -> None:
    row = {"namespace": "ml", "pod": "trainer-0", "owner_kind": "StatefulSet", "owner_name": "trainer",
           "labels": '{"gpuledger.io/evictable": "false"}'}
    spans = [(at(minutes=-30), at(days=40))] + ([(at(days=-2), at(hours=-1))] if incarnations == 2 else [])
    frames = {
        "gpus": gpus({"uuid": "GPU-M", "sharing_mode": "mig"}),
        "namespaces": namespaces({"ml": "research"}),
        "pods": pods(*({**row, "start_ts": lo, "end_ts": hi} for lo, hi in spans)),
        "gpu_samples": samples([Seg("GPU-M", at(), at(hours=1), "ml", "trainer-0", gpu_i_id=3,
                                    profile="3g.40gb")]),
    }
    path = load(tmp_path / "w.duckdb", window(2, at(hours=-1)), frames)
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM pods") == incarnations
        holders = mig_queries.holders_at_last_sample(wh)
    assert holders.select("uuid", "gpu_i_id", "mig_profile", "pod", "owner_kind").rows() == [
        ("GPU-M", 3, "3g.40gb", "trainer-0", "StatefulSet")]


def test_a_name_has_its_newest_incarnations_facts_even_where_they_are_none(tmp_path: Path) -> None:
    """A name that ran as a Job, then as a bare pod with other labels: the bare pod's facts."""
    rows = [{"namespace": "ml", "pod": "run-1", "owner_kind": "Job", "owner_name": "run",
             "labels": '{"team": "old"}', "start_ts": at(days=-3), "end_ts": at(days=-2)},
            {"namespace": "ml", "pod": "run-1", "owner_kind": None, "owner_name": None,
             "labels": '{"team": "new"}', "start_ts": at(days=-1), "end_ts": at(days=1)}]
    frames = {"gpus": gpus({"uuid": "GPU-1"}), "namespaces": namespaces({"ml": "research"}), "pods": pods(*rows),
              "gpu_samples": samples([Seg("GPU-1", at(), at(minutes=5), "ml", "run-1")])}
    path = load(tmp_path / "w.duckdb", window(1), frames)
    with Warehouse.open(path, read_only=True) as wh:
        owners = workload_queries.last_pod_owners(wh)
    assert owners.rows() == [("ml", "run-1", None, None, '{"team": "new"}')]
