"""Capacity now across clusters, through the org lake (`reports.lake_capacity`).

Cases, on two clusters' capacity published to a lake in tmp:
- each cluster's rows come back with its cluster, the numbers worked out here (allocatable minus
  running requests, a HAMi card's memory minus its allocations, a queue's nominal minus used),
  and each cluster's inventory time; publishing the same capacity again is `unchanged`;
- `why` in the cluster without room suggests the other one, naming the node: "fits now on e-1
  (cluster east, ...)"; without the lake, no suggestion;
- the partition is verified on read like the bill's: a data file swapped for other numbers is one
  error line; a lake nobody published capacity to says so;
- as a user runs it: `publish --capacity-only` of a demo warehouse, then `capacity --lake` prints
  the same rows as `capacity` on the warehouse, and an empty lake is one line, no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.analytics.capacity.headroom import QueueQuota
from gpuledger.analytics.capacity.now import NodeState, hami_left
from gpuledger.analytics.waiting.fleet import FleetNow
from gpuledger.analytics.waiting.why import Pending
from gpuledger.warehouse.lake.errors import LakeError
from gpuledger.warehouse.lake.location import Lake

AT = datetime(2026, 12, 2, 9, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"


def east() -> FleetNow:
    nodes = [NodeState("east", "e-1", "train", "A100-80GB", "exclusive", {GPU: 8}, {GPU: 5}),
             NodeState("east", "e-2", "train", "A100-80GB", "exclusive", {GPU: 8}, {GPU: 8})]
    hami = hami_left("east", "e-h", "share", "A100-40GB", memory_mib=40960, used_mib=20480,
                     used_cores=60, card="GPU-h")
    quotas = [QueueQuota("east", "research-cq", None, "a100", GPU, 8, used=6)]
    return FleetNow("east", AT, nodes, [], quotas, {}, {}, devices=hami)


def west() -> FleetNow:
    nodes = [NodeState("west", "w-1", "train", "A100-80GB", "exclusive", {GPU: 8}, {GPU: 8})]
    waiting = Pending("Pod", "nlp", "train-7", "kube-scheduler", requests={GPU: 2},
                      event_message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
                      created_at=AT - timedelta(hours=2), last_seen=AT)
    return FleetNow("west", AT + timedelta(minutes=5), nodes, [], [], {"w-1": {}}, {}, pending=[waiting])


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    from gpuledger.reports.lake_capacity import publish_capacity

    lake = Lake.open(str(tmp_path / "lake"))
    for fleet in (east(), west()):
        result = publish_capacity(lake, fleet.cluster, fleet)
        assert result is not None and result.status == "published"
    return lake


def test_every_cluster_answers_with_its_own_numbers(lake: Lake) -> None:
    from gpuledger.reports.lake_capacity import publish_capacity, read_capacity

    got = read_capacity(lake)
    rows = {(r.cluster, r.shape): r for r in got.capacity}
    assert rows[("east", "whole GPU")].ready == 8 - 5 and rows[("east", "whole GPU")].nodes == ("e-1",)
    assert ("west", "whole GPU") not in rows  # 8 - 8: nothing free there
    assert rows[("east", "hami gpumem MiB")].per_card == (("e-h/GPU-h", 40960 - 20480),)
    assert rows[("east", "hami gpucores %")].ready == 100 - 60
    [queue] = got.headroom
    assert (queue.cluster, queue.cluster_queue, queue.free) == ("east", "research-cq", 8 - 6)
    assert got.at == {"east": "2026-12-02T09:00:00Z", "west": "2026-12-02T09:05:00Z"}
    again = publish_capacity(lake, "east", east())
    assert again is not None and again.status == "unchanged" and again.files_written == 0


def test_why_suggests_the_cluster_with_room(lake: Lake) -> None:
    from gpuledger.reports.lake_capacity import read_capacity

    here = west()
    [alone] = here.why_rows(AT)
    assert alone["reason"] == "no capacity of that shape" and alone["suggestion"] is None
    [row] = replace(here, elsewhere=read_capacity(lake).capacity).why_rows(AT)
    assert row["suggestion"] == "submit to cluster east"
    assert row["suggestion_where"] == "fits now on e-1 (cluster east, pool train)"


def test_the_partition_is_verified_on_read(lake: Lake, tmp_path: Path) -> None:
    import polars as pl

    from gpuledger.reports.lake_capacity import read_capacity

    folder = tmp_path / "lake" / "cluster=east" / "period=now"
    [data] = folder.glob("capacity_now-*.parquet")
    forged = pl.read_parquet(data).with_columns(pl.col("ready") * 10)
    forged.write_parquet(data)
    with pytest.raises(LakeError, match="does not match its manifest"):
        read_capacity(lake)
    with pytest.raises(LakeError, match="no cluster has published its capacity"):
        read_capacity(Lake.open(str(tmp_path / "empty")))


def gl(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gpuledger", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_publish_then_capacity_over_the_lake_as_a_user(tmp_path: Path) -> None:
    from tests.dashboards.conftest import build_demo_warehouse

    wh = str(build_demo_warehouse(tmp_path / "demo.duckdb", gpus=32))
    lake = str(tmp_path / "lake")
    first = gl("--warehouse", wh, "publish", "--lake", lake, "--cluster", "east", "--capacity-only",
               "-o", "json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["capacity"] == "published"
    again = gl("--warehouse", wh, "publish", "--lake", lake, "--cluster", "east", "--capacity-only",
               "-o", "json")
    assert json.loads(again.stdout)["capacity"] == "unchanged"
    local = json.loads(gl("--warehouse", wh, "capacity", "-o", "json").stdout)
    over = gl("capacity", "--lake", lake, "-o", "json")
    assert over.returncode == 0, over.stderr
    doc = json.loads(over.stdout)
    assert doc["clusters"] == {"east": local["at"]} and len(local["capacity"]) > 3
    assert doc["capacity"] == [{**r, "cluster": "east"} for r in local["capacity"]]
    assert doc["queues"] == [{**q, "cluster": "east"} for q in local["queues"]]
    table = gl("capacity", "--lake", lake)
    assert table.returncode == 0 and "org lake: east at" in table.stdout
    empty = gl("capacity", "--lake", str(tmp_path / "nothing"))
    assert empty.returncode != 0 and "Traceback" not in empty.stderr
    assert len(empty.stderr.strip().splitlines()) == 1 and "no cluster has published" in empty.stderr
