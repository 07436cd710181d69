"""Configuration that changes over time prices each hour by the configuration valid then
(issue 31 item 7, docs/decisions/0207).

Reproduction: a time-sliced card configured for 2 replicas (GFD's `nvidia.com/gpu.replicas`)
on day 1, 3 replicas from day 2. The bill of day 1, computed before and after day 2's
collection, must be the same: day 1's pods paid 1/2 of the card each, whatever day 2 says.
Before v014 the `nodes` row kept one set of labels per node for its whole life (last collect
wins), so day 2's collect re-priced day 1 (each pod 1/3 of the card, the rest moved to
`unallocated`). Node labels are now stored with their validity interval (`node_history`).

Cases (prices: H100-80GB 3.00/card-hour; figures by hand):
- the replica count of day 2 does not re-price day 1 (1/2 card x 24 h = 12 card-hours each);
- a pool label changed on day 2 (`gpuledger.io/pool` a -> b): day 1's lines stay in pool a, and
  a bill of both days puts 24 card-hours in each pool, and a card held half of each day has its
  unheld hours on `unallocated` in the pool of their day;
- a Prometheus chunk's labels hold from the chunk's start (`valid_from`): the chunk of day 2 that
  reads 3 replicas prices day 2 at 1/3 (8 card-hours each, 8 unallocated), day 1 at 1/2;
- the history grows only on a change: four collects of the same labels (GFD's timestamp label
  moving each time) add no row, a changed MIG config adds one, re-loading a batch adds none;
- a v13 warehouse (nodes without history) upgrades in place and bills what it billed; after the
  upgrade, day 2's relabel does not move day 1 either;
- labels that arrive late for hours already rolled up mark them (`ROLLUP_DIRTY`) and are rolled
  up again before anything freezes them: the roll-up and the raw bill agree.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.usage.rollup import reroll_dirty, rollup_batch
from gpuledger.collectors.inventory import nodes_from_gpus
from gpuledger.collectors.ksm import with_node_labels
from gpuledger.core.config import Settings
from gpuledger.warehouse import LoadBatch, Warehouse, schema, store
from tests.analytics.builders import Seg, at, gpus, load, namespaces, samples, window
from tests.analytics.test_timeslice_replicas import _frames, _nodes

H100 = 3.00


def test_a_later_replica_count_does_not_reprice_an_earlier_day(tmp_path):
    day1 = window(24)
    frames = _frames(None, hours=24) | {
        "nodes": _nodes({"node": "node-a", "labels": json.dumps({"nvidia.com/gpu.replicas": "2"}),
                         "replicas": 2, "observed_at": at(0)}),
    }
    path = load(tmp_path / "wh.duckdb", day1, frames)
    with Warehouse.open(path) as wh:
        before = compute_bill(wh, day1, Settings(), source="raw")
        x_before = float(before.lines.filter(before.lines["team"] == "x")["card_hours"][0])
        # day 2's collect: the device plugin now splits the card 3 ways
        wh.load(LoadBatch({"nodes": _nodes({"node": "node-a", "replicas": 3, "observed_at": at(days=1),
                                            "labels": json.dumps({"nvidia.com/gpu.replicas": "3"})})}))
        after = compute_bill(wh, day1, Settings(), source="raw")
    assert x_before == pytest.approx(24 / 2)  # 1/2 of the card for 24 hours
    assert after.lines.equals(before.lines)


def _team_hours(bill: Any) -> dict[str, float]:
    """Card-hours per line, the `sharing_discount` line (money only) left out."""
    return {r["team"]: float(r["card_hours"]) for r in bill.lines.iter_rows(named=True)
            if r["team"] != "sharing_discount"}


def _pool_frames(hours: int) -> dict[str, pl.DataFrame]:
    """An exclusive card without a pool of its own, held by x's pod for `hours`."""
    return {
        "gpus": gpus({"uuid": "GPU-P", "pool": None}),
        "gpu_samples": samples([Seg("GPU-P", at(0), at(hours), "x-ns", "p1", act=0.4)]),
        "namespaces": namespaces({"x-ns": "x"}),
        "nodes": _nodes({"node": "node-a", "sharing_mode": "exclusive", "observed_at": at(0),
                         "labels": json.dumps({"gpuledger.io/pool": "a"})}),
    }


def test_a_later_pool_label_does_not_move_an_earlier_day(tmp_path):
    both = window(48)
    path = load(tmp_path / "wh.duckdb", both, _pool_frames(48))
    by = ("team", "pool")
    with Warehouse.open(path) as wh:
        before = compute_bill(wh, window(24), Settings(), by, source="raw")
        wh.load(LoadBatch({"nodes": _nodes({"node": "node-a", "sharing_mode": "exclusive",
                                            "observed_at": at(days=1),
                                            "labels": json.dumps({"gpuledger.io/pool": "b"})})}))
        after = compute_bill(wh, window(24), Settings(), by, source="raw")
        two_days = compute_bill(wh, both, Settings(), by, source="raw")
    assert [(r["team"], r["pool"]) for r in before.lines.iter_rows(named=True) if r["team"] == "x"] == [
        ("x", "a")]
    assert after.lines.equals(before.lines)
    split = {(r["team"], r["pool"]): float(r["card_hours"])
             for r in two_days.lines.iter_rows(named=True) if r["team"] == "x"}
    assert split == {("x", "a"): pytest.approx(24.0), ("x", "b"): pytest.approx(24.0)}
    assert two_days.fleet_cost == pytest.approx(48 * H100)


def _chunk_nodes(chunk_start: int, replicas: str) -> pl.DataFrame:
    """The `nodes` frame the Prometheus collector builds for the day-long chunk starting on day
    `chunk_start`, kube-state-metrics reading `replicas` (`collectors.prometheus`)."""
    cards = gpus({"uuid": "GPU-T", "sharing_mode": "timeslice", "replicas": 2})
    frame = nodes_from_gpus(cards, at(days=chunk_start + 1), at(days=chunk_start))
    return with_node_labels(frame, {"node-a": {"nvidia.com/gpu.replicas": replicas}})


def test_a_chunks_labels_hold_from_the_chunks_start(tmp_path):
    path = load(tmp_path / "wh.duckdb", window(48), _frames(None, hours=48))
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"nodes": _chunk_nodes(0, "2")}))
        wh.load(LoadBatch({"nodes": _chunk_nodes(1, "3")}))
        day1 = compute_bill(wh, window(24), Settings(), source="raw")
        day2 = compute_bill(wh, window(24, at(days=1)), Settings(), source="raw")
    assert _team_hours(day1) == {"x": pytest.approx(12.0), "y": pytest.approx(12.0)}
    assert _team_hours(day2) == {  # 1/3 of the card each for 24 h; the third replica nobody's
        "x": pytest.approx(8.0), "y": pytest.approx(8.0), "unallocated": pytest.approx(8.0)}
    assert day2.replicas_unknown_nodes == ()


def _history(wh: Warehouse) -> list[tuple[Any, ...]]:
    return wh.query("SELECT valid_from, mig_config FROM node_history ORDER BY valid_from").rows()


def test_history_grows_only_on_a_change(tmp_path):
    def node(minute: int, mig: str) -> LoadBatch:
        labels = {"nvidia.com/mig.config": mig, "nvidia.com/gfd.timestamp": str(1_790_000_000 + minute)}
        return LoadBatch({"nodes": _nodes({"node": "node-a", "observed_at": at(minutes=minute),
                                           "mig_config": mig, "labels": json.dumps(labels),
                                           "resource_version": str(minute)})})
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        for minute in (0, 15, 30, 45):  # a collect every 15 minutes, nothing configured anew
            wh.load(node(minute, "all-3g.40gb"))
        assert _history(wh) == [(at(0), "all-3g.40gb")]
        wh.load(node(60, "all-1g.10gb"))
        wh.load(node(60, "all-1g.10gb"))  # the same batch again
        wh.load(node(75, "all-1g.10gb"))
        assert _history(wh) == [(at(0), "all-3g.40gb"), (at(1), "all-1g.10gb")]
        assert wh.query("SELECT mig_config, resource_version FROM nodes").rows() == [("all-1g.10gb", "75")]


def _v13_warehouse(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warehouse as gpuledger with schema v13 left it: day 1 with `node-a` at 2 replicas in
    `nodes`, and no `node_history` (the load that writes it did not exist)."""
    frames = _frames(None, hours=24)
    with monkeypatch.context() as m:
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:13])
        m.setattr(schema, "LATEST", 13)
        m.setattr(store, "LATEST", 13)
        m.setattr(store, "kept_current", lambda *_: nullcontext())  # nor the fingerprints (v018)
        m.setattr(store, "extend_history", lambda *_: None)  # no history tables before v14
        with Warehouse.open(path) as wh:
            wh.load(LoadBatch(frames=frames, window=window(24)))
            wh.con.execute(
                "INSERT INTO nodes (node, pool, model, gpu_count, sharing_mode, labels, observed_at) "
                "VALUES ('node-a', 'default', 'H100-80GB', 1, 'timeslice', ?, ?)",
                [json.dumps({"nvidia.com/gpu.replicas": "2"}), at(0)],
            )
            assert schema.current_version(wh.con) == 13


def test_a_v13_warehouse_upgrades_in_place_and_bills_the_same(tmp_path, monkeypatch):
    old = tmp_path / "v13.duckdb"
    _v13_warehouse(old, monkeypatch)
    fresh = load(tmp_path / "v14.duckdb", window(24), _frames({"nvidia.com/gpu.replicas": "2"}, hours=24))
    with Warehouse.open(fresh, read_only=True) as wh:
        expected = compute_bill(wh, window(24), Settings(), source="raw")
    with Warehouse.open(old) as wh:
        assert schema.current_version(wh.con) == schema.LATEST
        assert wh.query("SELECT node, valid_from, replicas IS NULL FROM node_history").rows() == [
            ("node-a", at(0), True)]
        upgraded = compute_bill(wh, window(24), Settings(), source="raw")
        wh.load(LoadBatch({"nodes": _nodes({"node": "node-a", "replicas": 3, "observed_at": at(days=1),
                                            "labels": json.dumps({"nvidia.com/gpu.replicas": "3"})})}))
        relabelled = compute_bill(wh, window(24), Settings(), source="raw")
    assert _team_hours(upgraded) == {"x": pytest.approx(12.0), "y": pytest.approx(12.0)}
    assert upgraded.lines.equals(expected.lines)
    assert relabelled.lines.equals(upgraded.lines)


def test_late_labels_below_the_rollup_are_rolled_up_again(tmp_path):
    """Day 2's chunk re-read after both days were rolled up now says 3 replicas: the roll-up of
    day 2 is marked and rolled up again (what compact and finalize do first), so the bill from
    the roll-up and from raw samples agree; day 1 keeps its 12 card-hours a pod."""
    path = load(tmp_path / "wh.duckdb", window(48), _frames(None, hours=48))
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"nodes": _chunk_nodes(0, "2")}))
        wh.load(rollup_batch(wh, window(48), Settings()))
        wh.load(LoadBatch({"nodes": _chunk_nodes(1, "3")}))
        assert wh.watermark(store.ROLLUP_DIRTY) == at(days=1)
        again = reroll_dirty(wh, Settings())
        day2 = window(24, at(days=1))
        rolled = compute_bill(wh, day2, Settings(), source="rollup")
        raw = compute_bill(wh, day2, Settings(), source="raw")
        day1 = compute_bill(wh, window(24), Settings(), source="rollup")
    assert day2 in again.days  # (and day 1, within the sample pass's margin: the same numbers)
    assert _team_hours(rolled) == {"x": pytest.approx(8.0), "y": pytest.approx(8.0),
                                   "unallocated": pytest.approx(8.0)}
    assert rolled.lines.drop("card_hours").equals(raw.lines.drop("card_hours"))  # money to the cent
    assert _team_hours(rolled) == pytest.approx(_team_hours(raw))  # (sums in another order)
    assert _team_hours(day1) == {"x": pytest.approx(12.0), "y": pytest.approx(12.0)}


def test_unallocated_hours_stay_in_the_pool_of_their_day(tmp_path):
    """The card is held 12 h a day; its other 12 h a day are capacity nobody held, on the
    `unallocated` line in the pool the node was in that day (12 in a, 12 in b)."""
    frames = _pool_frames(48) | {"gpu_samples": samples([
        Seg("GPU-P", at(0), at(12), "x-ns", "p1", act=0.4),
        Seg("GPU-P", at(24), at(36), "x-ns", "p1", act=0.4),
    ])}
    path = load(tmp_path / "wh.duckdb", window(48), frames)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch({"nodes": _nodes({"node": "node-a", "sharing_mode": "exclusive",
                                            "observed_at": at(days=1),
                                            "labels": json.dumps({"gpuledger.io/pool": "b"})})}))
        bill = compute_bill(wh, window(48), Settings(), ("team", "pool"), source="raw")
    split = {(r["team"], r["pool"]): float(r["card_hours"]) for r in bill.lines.iter_rows(named=True)
             if r["team"] != "sharing_discount"}
    assert split == {("x", "a"): pytest.approx(12.0), ("x", "b"): pytest.approx(12.0),
                     ("unallocated", "a"): pytest.approx(12.0), ("unallocated", "b"): pytest.approx(12.0)}
    assert bill.fleet_cost == pytest.approx(48 * H100)
