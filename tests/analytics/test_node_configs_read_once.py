"""A bill reads the node configurations (`node_history`, `replicas.node_configs`) once, for
`cards`, the hourly frame's `at_hour`, the capacity rows' `at_day` and `replicas_unknown_nodes`
(issue 34: each read them again for the same window), and prices each hour and day by the
configuration in force then as before (figures by hand, as in test_configuration_over_time).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.devices import replicas
from gpuledger.core.config import Settings
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.builders import Seg, at, load, samples, window
from tests.analytics.test_configuration_over_time import H100, _chunk_nodes, _nodes, _pool_frames
from tests.analytics.test_timeslice_replicas import _frames


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = replicas.node_config_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(replicas, "node_config_rows", counted)
    return reads


def test_a_pool_relabel_is_read_once_and_each_day_keeps_its_pool(tmp_path, monkeypatch):
    frames = _pool_frames(48) | {"gpu_samples": samples([
        Seg("GPU-P", at(0), at(12), "x-ns", "p1", act=0.4),
        Seg("GPU-P", at(24), at(36), "x-ns", "p1", act=0.4),
    ])}
    path = load(tmp_path / "wh.duckdb", window(48), frames)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"nodes": _nodes({"node": "node-a", "sharing_mode": "exclusive",
                                            "observed_at": at(days=1),
                                            "labels": json.dumps({"gpuledger.io/pool": "b"})})}))
        reads = _counting(monkeypatch)
        bill = compute_bill(wh, window(48), Settings(), ("team", "pool"), source="raw")
    assert len(reads) == 1
    split = {(r["team"], r["pool"]): float(r["card_hours"]) for r in bill.lines.iter_rows(named=True)
             if r["team"] != "sharing_discount"}
    assert split == {("x", "a"): pytest.approx(12.0), ("x", "b"): pytest.approx(12.0),
                     ("unallocated", "a"): pytest.approx(12.0), ("unallocated", "b"): pytest.approx(12.0)}
    assert bill.fleet_cost == pytest.approx(48 * H100)


def test_a_replica_change_is_read_once_and_each_day_keeps_its_count(tmp_path, monkeypatch):
    path = load(tmp_path / "wh.duckdb", window(48), _frames(None, hours=48))
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"nodes": _chunk_nodes(0, "2")}))
        wh.load(LoadBatch({"nodes": _chunk_nodes(1, "3")}))
        reads = _counting(monkeypatch)
        both = compute_bill(wh, window(48), Settings(), ("team",), source="raw")
    assert len(reads) == 1
    hours = {r["team"]: float(r["card_hours"]) for r in both.lines.iter_rows(named=True)
             if r["team"] != "sharing_discount"}
    # day 1: 1/2 card each x 24 h; day 2: 1/3 each x 24 h, the third replica nobody's
    assert hours == {"x": pytest.approx(12.0 + 8.0), "y": pytest.approx(12.0 + 8.0),
                     "unallocated": pytest.approx(8.0)}
    assert both.replicas_unknown_nodes == ()
