"""A namespace's team is billed as it was at the time, not as the last collect says (issue 31
item 7, docs/decisions/0226), and older observations loaded late cannot rewrite the present
(docs/decisions/0227).

Reproduction: namespace `ml-ns` labelled `team: a` on day 1 and relabelled `team: b` from day 2.
Before v015 `namespaces` kept one row per namespace (last collect wins): day 2's collect moved
day 1's cost to b.

Cases (one exclusive H100 held by `ml-ns` for 48 h; H100-80GB 3.00/card-hour, so a day is
24 card-hours x 3.00 = 72.00):
- day 1 stays with a after the relabel, the two days split 72.00 / 72.00, from raw samples
  and from the roll-up summed per period (the lines grain cuts its period at the relabel);
- a v14 warehouse (namespaces without history) upgrades in place and bills the same;
- the history grows only on a change of team or labels; re-loading a batch adds nothing;
- a backfill of an old window leaves `nodes` / `namespaces` (the readers of "now") at the
  newest observation; the history takes the old one;
- an observation older than the first row becomes the first row where it differs, and moves
  the first row's start earlier where it agrees (consecutive rows always differ).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from datetime import datetime
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.analytics.usage.rollup import rollup_batch
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.warehouse import LoadBatch, Warehouse, schema, store
from gpuledger.warehouse.dimension_load import extend_history
from tests.analytics.builders import Seg, at, gpus, load, samples, window
from tests.analytics.test_timeslice_replicas import _nodes

DAY = 24 * 3.00  # one card for 24 hours at the H100 price


def _ns(team: str, seen: datetime, **labels: str) -> LoadBatch:
    """What a collect at `seen` stores for `ml-ns` labelled `team`."""
    row = {"namespace": "ml-ns", "team": team, "labels": json.dumps({"team": team} | labels),
           "observed_at": seen}
    return LoadBatch({"namespaces": pl.DataFrame([row], schema=polars_schema(TABLES["namespaces"]))})


def _frames() -> dict[str, pl.DataFrame]:
    """An exclusive card held by `ml-ns`'s pod for 48 hours (no namespace yet)."""
    return {"gpus": gpus({"uuid": "GPU-E", "pool": None}),  # its pool: the node's label
            "gpu_samples": samples([Seg("GPU-E", at(0), at(48), "ml-ns", "p1", act=0.5)])}


def _costs(bill: Any) -> dict[str, float]:
    return {r["team"]: float(r["cost"]) for r in bill.lines.iter_rows(named=True) if r["cost"]}


def _history(wh: Warehouse) -> list[tuple[Any, ...]]:
    return wh.query("SELECT valid_from, team FROM namespace_history ORDER BY valid_from").rows()


def test_a_relabel_on_day_2_leaves_day_1_with_its_team(tmp_path):
    path = load(tmp_path / "wh.duckdb", window(48), _frames())
    with Warehouse.open(path) as wh:
        wh.load(_ns("a", at(0)))
        before = compute_bill(wh, window(24), Settings(), source="raw")
        wh.load(_ns("b", at(days=1)))  # day 2's collect: the namespace now belongs to b
        after = compute_bill(wh, window(24), Settings(), source="raw")
        both = compute_bill(wh, window(48), Settings(), source="raw")
        assert wh.query("SELECT team FROM namespaces").rows() == [("b",)]  # "now" is b
    assert _costs(before) == {"a": pytest.approx(DAY)}
    assert after.lines.equals(before.lines)
    assert _costs(both) == {"a": pytest.approx(DAY), "b": pytest.approx(DAY)}


def test_the_rollup_summed_per_period_cuts_at_the_relabel(tmp_path):
    """The lines grain sums the roll-up per price period (one price, 48 h): without a cut at the
    relabel the whole period would go to the team at its start."""
    path = load(tmp_path / "wh.duckdb", window(48), _frames())
    with Warehouse.open(path) as wh:
        wh.load(_ns("a", at(0)))
        wh.load(rollup_batch(wh, window(48), Settings()))
        wh.load(_ns("b", at(days=1)))
        lines = compute_bill(wh, window(48), Settings(), source="rollup", grain="lines")
        device = compute_bill(wh, window(48), Settings(), source="rollup")
    assert _costs(lines) == {"a": pytest.approx(DAY), "b": pytest.approx(DAY)}
    assert _costs(device) == _costs(lines)


def test_a_v14_warehouse_upgrades_in_place_and_bills_the_same(tmp_path, monkeypatch):
    old, fresh = tmp_path / "v14.duckdb", tmp_path / "v15.duckdb"
    with monkeypatch.context() as m:  # this code as the v14 release: no namespace history
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:14])
        m.setattr(schema, "LATEST", 14)
        m.setattr(store, "LATEST", 14)
        m.setattr(store, "kept_current", lambda *_: nullcontext())  # nor the fingerprints (v018)
        m.setattr(store, "extend_history", lambda con, table, view, mark: (
            None if table == "namespaces" else extend_history(con, table, view, mark)))
        load(old, window(48), _frames())
        with Warehouse.open(old) as wh:
            wh.load(_ns("a", at(0)))
            assert schema.current_version(wh.con) == 14
    load(fresh, window(48), _frames())
    with Warehouse.open(fresh) as wh:
        wh.load(_ns("a", at(0)))
        expected = compute_bill(wh, window(48), Settings(), source="raw")
    with Warehouse.open(old) as wh:
        assert schema.current_version(wh.con) == schema.LATEST
        assert _history(wh) == [(at(0), "a")]
        upgraded = compute_bill(wh, window(48), Settings(), source="raw")
        wh.load(_ns("b", at(days=1)))
        relabelled = compute_bill(wh, window(48), Settings(), source="raw")
    assert _costs(upgraded) == {"a": pytest.approx(2 * DAY)}
    assert upgraded.lines.equals(expected.lines)
    assert _costs(relabelled) == {"a": pytest.approx(DAY), "b": pytest.approx(DAY)}


def test_history_grows_only_on_a_change(tmp_path):
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        for hour in (0, 1, 2):  # collects that see nothing new
            wh.load(_ns("a", at(hour)))
        wh.load(_ns("a", at(2)))  # the same batch again
        assert _history(wh) == [(at(0), "a")]
        wh.load(_ns("a", at(3), owner="ml"))  # another label, the same team: a row (labels resolve teams)
        wh.load(_ns("b", at(4), owner="ml"))
        wh.load(_ns("b", at(5), owner="ml"))
        assert _history(wh) == [(at(0), "a"), (at(3), "a"), (at(4), "b")]


def test_a_backfill_of_an_old_window_keeps_the_newest_labels_for_now(tmp_path):
    """A collect of day 2, then a backfill of day 1 with day 1's labels: the readers of "now"
    (waiting, capacity, the MIG planner read `nodes`) keep day 2's; the history has both."""
    def node(seen: datetime, pool: str) -> LoadBatch:
        return LoadBatch({"nodes": _nodes({"node": "node-a", "sharing_mode": "exclusive", "observed_at": seen,
                                           "labels": json.dumps({"gpuledger.io/pool": pool})})})
    path = load(tmp_path / "wh.duckdb", window(48), _frames())
    with Warehouse.open(path) as wh:
        wh.load(node(at(days=1), "b"))
        wh.load(_ns("b", at(days=1)))
        wh.load(node(at(0), "a"))  # the backfill, loaded last
        wh.load(_ns("a", at(0)))
        now_nodes = wh.query("SELECT CAST(labels AS VARCHAR), observed_at FROM nodes").rows()
        now_ns = wh.query("SELECT team, observed_at FROM namespaces").rows()
        nodes = wh.query("SELECT valid_from, labels->>'$.\"gpuledger.io/pool\"' FROM node_history "
                         "ORDER BY valid_from").rows()
        both = compute_bill(wh, window(48), Settings(), ("team", "pool"), source="raw")
    assert now_nodes == [(json.dumps({"gpuledger.io/pool": "b"}), at(days=1))]
    assert now_ns == [("b", at(days=1))]
    assert nodes == [(at(0), "a"), (at(days=1), "b")]
    assert {(r["team"], r["pool"]): float(r["cost"]) for r in both.lines.iter_rows(named=True) if r["cost"]} == {
        ("a", "a"): pytest.approx(DAY), ("b", "b"): pytest.approx(DAY)}


def test_an_older_observation_becomes_the_first_row(tmp_path):
    """Only day 2's collect is known: b stands for day 1 too (nothing earlier is known). Day 1's
    observation arrives late: it is the evidence for day 1 and before, so day 1 moves to a; an
    older observation that agrees with the first row moves its start, adding no row."""
    path = load(tmp_path / "wh.duckdb", window(48), _frames())
    with Warehouse.open(path) as wh:
        wh.load(_ns("b", at(days=1)))
        guessed = compute_bill(wh, window(48), Settings(), source="raw")
        wh.load(_ns("b", at(12)))  # agrees with the first row: b held from hour 12
        assert _history(wh) == [(at(12), "b")]
        wh.load(_ns("a", at(0)))  # differs: a held from hour 0 (and before)
        assert _history(wh) == [(at(0), "a"), (at(12), "b")]
        known = compute_bill(wh, window(48), Settings(), source="raw")
    assert _costs(guessed) == {"b": pytest.approx(2 * DAY)}
    # the team in force at each day's start: day 1 a, day 2 b (b's first half-day is a limit, 0226)
    assert _costs(known) == {"a": pytest.approx(DAY), "b": pytest.approx(DAY)}


def test_an_older_node_observation_moves_the_first_row_or_precedes_it(tmp_path):
    def node(minute: int, mig: str) -> LoadBatch:
        return LoadBatch({"nodes": _nodes({"node": "node-a", "observed_at": at(minutes=minute),
                                           "mig_config": mig, "labels": json.dumps({"nvidia.com/mig.config": mig})})})
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(node(60, "all-1g.10gb"))
        wh.load(node(30, "all-1g.10gb"))  # older, the same: the first row starts earlier
        assert wh.query("SELECT valid_from, mig_config FROM node_history").rows() == [(at(minutes=30), "all-1g.10gb")]
        wh.load(node(0, "all-3g.40gb"))  # older still, another layout: a row before it
        rows = wh.query("SELECT valid_from, mig_config FROM node_history ORDER BY valid_from").rows()
        now = wh.query("SELECT mig_config FROM nodes").rows()
    assert rows == [(at(0), "all-3g.40gb"), (at(minutes=30), "all-1g.10gb")]
    assert now == [("all-1g.10gb",)]


def test_the_fleet_pages_mig_holders_name_the_team_of_that_moment(tmp_path):
    """The Fleet page's MIG cells at a past moment (`ReadModel.mig_instances`) name the holder's
    team then: before the relabel a, after it b (it read today's `namespaces` row: b for both)."""
    from gpuledger.dashboards.readmodel import ReadModel
    from gpuledger.warehouse.snapshot_store import SnapshotStore
    from tests.analytics.builders import mig_instances

    frames = {"gpus": gpus({"uuid": "GPU-M", "sharing_mode": "mig"}),
              "mig_instances": mig_instances(("GPU-M", 1, "1g.10gb", at(0), at(48))),
              "gpu_samples": samples([Seg("GPU-M", at(0), at(48), "ml-ns", "p1", gpu_i_id=1,
                                          profile="1g.10gb")])}
    path = load(tmp_path / "wh.duckdb", window(48), frames)
    with Warehouse.open(path) as wh:
        wh.load(_ns("a", at(0)))
        wh.load(_ns("b", at(days=1)))
    store = SnapshotStore(path, cache_dir=tmp_path / "c")
    data = ReadModel(store, Settings())
    try:
        held = {when: data.mig_instances(at(hours)).select("pod", "team").rows()
                for when, hours in (("day 1", 12), ("day 2", 36))}
    finally:
        data.close()
        store.stop()
    assert held == {"day 1": [("p1", "a")], "day 2": [("p1", "b")]}
