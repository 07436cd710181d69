"""Capacity counts a card only while it was present: replaced cards and churning nodes.

The fleet's capacity is each inventoried card's presence, from `gpus.first_seen` to
`last_seen` plus what that last observation stands for (`analytics.devices.capacity.presence_by_day`).
A simulator inventory that claimed every card for the whole window made a replaced card extra
capacity (41 UUIDs x 12 h = 492 card-hours for 40 slots) and put a churning node's absent hours
on `unallocated` (480 instead of 432). Expected numbers are worked out by hand from the field
effects' documented schedule (`simulator.field_hardware`): the 12-hour window 2026-11-01
00:00-12:00 at 1-minute steps (720 steps); a replacement at the hour nearest two thirds of the
window (08:00) leaves the slot empty for 10 minutes (`REPLACE_GAP_S`); of two churning 8-card
nodes, one joins at a quarter (03:00) and one leaves at three quarters (09:00).

Cases:
- `presence_by_day` by hand, across midnight: a card first seen 20:00 and last seen 02:59 with
  1-minute samples is present 4 h on the first day and 3 h on the second;
- the simulator inventory under one card replacement: the old card 00:00-07:59, the new one
  08:10-11:59 (first/last observed steps), every other card the whole window;
- the simulator inventory under node churn: the joining node's 8 cards 03:00-11:59, the leaving
  node's 00:00-08:59;
- through a real DuckDB warehouse and `compute_bill`: with one replacement the fleet's
  card-hours are 40 x 12 - 10/60 = 479.8333 (the old card 8 h, the new one 3 h 50 min), with
  node churn 40 x 12 - 2 x 8 x 3 = 432, and each equals the truth's capacity; the bill still
  conserves to the cent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.devices.capacity import presence_by_day
from gpuledger.core.config import Settings
from gpuledger.core.frames import GPUS, polars_schema
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.field import FieldEffects
from gpuledger.simulator.fleet import FleetSpec
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.conftest import assert_conserved

T0 = datetime(2026, 11, 1, tzinfo=UTC)
WINDOW = Window(T0, T0 + timedelta(hours=12))
MINUTE = timedelta(minutes=1)


def at(hours: int, minutes: int = 0) -> datetime:
    return T0 + timedelta(hours=hours, minutes=minutes)


def _sim(effects: FieldEffects) -> Simulation:
    return Simulation(FleetSpec.default(gpus=40, field=effects), WINDOW, seed=7)


def _seen(sim: Simulation) -> dict[str, tuple[datetime, datetime]]:
    gpus = sim.inventory()["gpus"]
    return {u: (f, last) for u, f, last in gpus.select("uuid", "first_seen", "last_seen").iter_rows()}


def _bill(sim: Simulation, path: Path) -> Bill:
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(frames=sim.inventory()))
        for chunk, frames in sim.batches():
            wh.load(LoadBatch(frames=frames, window=chunk))
    with Warehouse.open(path, read_only=True) as wh:
        bill = compute_bill(wh, WINDOW, Settings(), ("team", "uuid"))
    assert_conserved(bill)
    return bill


def _card_hours_by_uuid(bill: Bill) -> dict[str, float]:
    frame = bill.lines.group_by("uuid").agg(pl.col("card_hours").sum())
    return dict(frame.iter_rows())


def test_presence_by_day_across_midnight() -> None:
    window = Window(datetime(2026, 11, 1, 18, tzinfo=UTC), datetime(2026, 11, 2, 6, tzinfo=UTC))
    row = {c: None for c in GPUS.column_names} | {
        "uuid": "GPU-1", "node": "n1", "gpu_index": 0, "model": "H100-80GB",
        "sharing_mode": "exclusive",
        "first_seen": datetime(2026, 11, 1, 20, tzinfo=UTC),
        "last_seen": datetime(2026, 11, 2, 2, 59, tzinfo=UTC),
    }
    gpus = pl.DataFrame([row], schema=polars_schema(GPUS))
    presence = presence_by_day(gpus, window, MINUTE).sort("day")
    assert presence["day"].to_list() == [datetime(2026, 11, 1).date(), datetime(2026, 11, 2).date()]
    assert presence["present_hours"].to_list() == pytest.approx([4.0, 3.0], abs=1e-9)


def test_inventory_replaced_card_is_present_only_while_in_its_slot() -> None:
    sim = _sim(FieldEffects(card_replacements=1))
    seen = _seen(sim)
    new = sim.hw.gpus[-1]
    old = next(g for g in sim.hw.gpus[:-1] if (g.node, g.index) == (new.node, new.index))
    assert len(seen) == 41
    assert seen[old.uuid] == (at(0), at(7, 59))
    assert seen[new.uuid] == (at(8, 10), at(11, 59))
    others = {v for u, v in seen.items() if u not in (old.uuid, new.uuid)}
    assert others == {(at(0), at(11, 59))}


def test_inventory_churning_nodes_cards_are_present_only_while_the_node_is() -> None:
    sim = _sim(FieldEffects(node_churn=2))
    seen = _seen(sim)
    spans: dict[tuple[datetime, datetime], int] = {}
    for span in seen.values():
        spans[span] = spans.get(span, 0) + 1
    assert spans == {(at(0), at(11, 59)): 24, (at(3), at(11, 59)): 8, (at(0), at(8, 59)): 8}


def test_bill_capacity_with_a_replaced_card(tmp_path: Path) -> None:
    sim = _sim(FieldEffects(card_replacements=1))
    bill = _bill(sim, tmp_path / "w.duckdb")
    assert bill.fleet_card_hours == pytest.approx(40 * 12 - 10 / 60, abs=1e-6)
    assert bill.fleet_card_hours == pytest.approx(float(sim.ground_truth()["card_hours"].sum()), abs=1e-6)
    new = sim.hw.gpus[-1]
    old = next(g for g in sim.hw.gpus[:-1] if (g.node, g.index) == (new.node, new.index))
    per_card = _card_hours_by_uuid(bill)
    assert per_card[old.uuid] == pytest.approx(8.0, abs=1e-6)
    assert per_card[new.uuid] == pytest.approx(3 + 50 / 60, abs=1e-6)


def test_bill_capacity_with_node_churn(tmp_path: Path) -> None:
    sim = _sim(FieldEffects(node_churn=2))
    bill = _bill(sim, tmp_path / "w.duckdb")
    assert bill.fleet_card_hours == pytest.approx(40 * 12 - 2 * 8 * 3, abs=1e-6)
    assert bill.fleet_card_hours == pytest.approx(float(sim.ground_truth()["card_hours"].sum()), abs=1e-6)
