"""The DRA pool billed end to end: its dcgm series (with `dra_*` labels) backfilled into a real
Prometheus and collected, its claims, slices and pods as a collector listing every 10 minutes
saw them, and the bill compared with the simulator's truth (computed from the plan of the day).
Every case runs twice: series with `pod`/`namespace` next to the `dra_*` labels, and series with
the `dra_*` labels only.

Cases:
- card-hours per team within 0.5% and idle card-hours within 1% of the truth (here: exact to
  1e-6, the plan being minute-aligned), from raw samples and again from the stored roll-up; the
  fleet's card-hours are every DRA card for the whole window (the rest is `unallocated`);
- the dynamic MIG claim whose pod never ran (no series at all) is billed its 4g share for its
  hour, with activity unknown; the whole-GPU claim allocated 30 minutes before its pod ran is
  billed from allocation, not from the first sample;
- claim rows are keyed on (parent card, placement, claim UID), never on a MIG UUID: two dynamic
  MIG claims on one card stay two rows, both on the parent's UUID;
- the sample rows the claims explain are not billed a second time (each card's hour <= 1);
- `sharing.discounts.dra` prices DRA rows like any mode's discount;
- `--by claim,device_class` names each claim and its DeviceClass, from raw samples at the device
  grain and from the roll-up at the `lines` grain (what `gpuledger bill` prints).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.usage.hourly import hourly_usage
from gpuledger.collect_pipeline import collect_window
from gpuledger.collectors.dra import DraObjects, frames_from_history
from gpuledger.core.config import Settings
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.simulator.dra import BLOCK_MINUTES, CARDS, CLAIMS, TEAMS, DraPool
from gpuledger.simulator.dra_metrics import dcgm_minute, write_openmetrics
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch
from tools.metrics_servers import ServerPool

START = datetime(2026, 3, 1, tzinfo=UTC)
POOL = DraPool(START)
WINDOW = Window(START, POOL.end)
SETTINGS = Settings(prometheus={"chunk": "2h", "retries": 1})
pytestmark = pytest.mark.slow


def load_dra(wh: Warehouse, pool: DraPool) -> None:
    """The claims as a collector listing every 10 minutes would have stored them."""
    frames = frames_from_history((at, DraObjects(**objs)) for at, objs in pool.snapshots())
    namespaces = pl.DataFrame([
        {"namespace": n, "team": t, "labels": json.dumps({"team": t}), "observed_at": WINDOW.end}
        for n, t in TEAMS.items()
    ])
    wh.load(LoadBatch(frames={**frames, "namespaces": namespaces}))


@pytest.fixture(scope="module", params=["workload-labels", "dra-labels-only"])
def wh(request: pytest.FixtureRequest, metrics_servers: ServerPool,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    """The pool collected; its series name their pod and namespace, or (as a DRA-aware
    dcgm-exporter may) only their claim: `dra_claim_namespace`, the pod from the claim."""
    root = tmp_path_factory.mktemp("dra-e2e")
    om = root / "dra.om"
    write_openmetrics([POOL], om, workload_labels=request.param == "workload-labels")
    server = metrics_servers.prometheus(om)
    with Warehouse.open(root / "w.duckdb") as store:
        load_dra(store, POOL)
        collect_window(store, SETTINGS, server.url, WINDOW, now=lambda: WINDOW.end)
        yield store


def _by_team(bill: Bill) -> dict[str, tuple[float, float]]:
    return {r["team"]: (r["card_hours"], r["idle_card_hours"]) for r in bill.lines.iter_rows(named=True)}


def test_samples_were_collected(wh: Warehouse) -> None:
    # One row per device series and minute: the claims' series and the cards' unclaimed ones.
    assert wh.count("gpu_samples") == sum(1 for m in range(BLOCK_MINUTES) for _ in dcgm_minute(POOL, m))


@pytest.mark.parametrize("source", ["raw", "rollup"])
def test_the_bill_equals_the_truth(wh: Warehouse, source: str) -> None:
    if source == "rollup":
        from gpuledger.analytics.usage.rollup import rollup_batch

        wh.load(rollup_batch(wh, WINDOW, SETTINGS))
    bill = compute_bill(wh, WINDOW, SETTINGS, by=("team",), source=source)
    assert bill.fleet_card_hours == pytest.approx(len(CARDS) * WINDOW.hours)  # every card, all day
    lines = _by_team(bill)
    for team, truth in POOL.truth().items():
        card_hours, idle = lines[team]
        assert card_hours == pytest.approx(truth["card_hours"], rel=0.005), team
        assert idle == pytest.approx(truth["idle_card_hours"], rel=0.01), team
        assert card_hours == pytest.approx(truth["card_hours"], abs=1e-6), team


def _claim_rows(wh: Warehouse) -> pl.DataFrame:
    return hourly_usage(wh, WINDOW, Rules.of(SETTINGS)).filter(pl.col("sharing_mode") == "dra")


def test_claims_without_telemetry_are_billed(wh: Warehouse) -> None:
    rows = _claim_rows(wh)
    pending = next(c for c in CLAIMS if c.name == "dyn-a-pending")
    held = rows.filter(pl.col("pod") == "a-pending")
    assert held["card_hours"].sum() == pytest.approx(4 / 7 * (pending.end - pending.start) / 60)
    assert held["active_ratio"].null_count() == held.height
    early = rows.filter(pl.col("pod") == "b-train-0")
    assert early["held_hours"].sum() == pytest.approx((270 - 60) / 60)


def test_rows_are_keyed_on_parent_placement_and_claim(wh: Warehouse) -> None:
    rows = _claim_rows(wh)
    dynamic = CARDS[4]
    on_card = rows.filter(pl.col("uuid") == dynamic.uuid)
    keys = set(on_card.select("gpu_i_id", "profile").unique().iter_rows())
    assert keys == {(c.placement, c.profile) for c in CLAIMS if c.card == dynamic}
    assert on_card["vgpu"].n_unique() == 3
    assert not rows["uuid"].str.starts_with("MIG-").any()


def test_no_card_hour_is_billed_twice(wh: Warehouse) -> None:
    hourly = hourly_usage(wh, WINDOW, Rules.of(SETTINGS))
    per_card = hourly.group_by("uuid", "ts").agg(pl.col("card_hours").sum())
    assert per_card["card_hours"].max() <= 1 + 1e-9
    dra_cards = {c.uuid for c in CARDS}
    leftover = hourly.filter(pl.col("uuid").is_in(dra_cards) & (pl.col("sharing_mode") != "dra"))
    assert leftover.is_empty()


def test_dra_rows_take_the_dra_discount(wh: Warehouse) -> None:
    settings = Settings(prometheus={"chunk": "2h", "retries": 1}, sharing={"discounts": {"dra": 0.8}})
    bill = compute_bill(wh, WINDOW, settings, by=("team", "sharing_mode"), source="raw")
    dra = bill.detail.filter((pl.col("sharing_mode") == "dra") & (pl.col("kind") == "allocated"))
    assert dra["discount_factor"].unique().to_list() == [0.8]
    discount = bill.lines.filter(pl.col("team") == "sharing_discount")["sharing_discount"].sum()
    assert -discount == pytest.approx(0.2 * dra["list_cost"].sum())


@pytest.mark.parametrize("grain", ["device", "lines"])
def test_by_claim_and_device_class(wh: Warehouse, grain: str) -> None:
    from gpuledger.analytics.usage.rollup import rollup_batch

    wh.load(rollup_batch(wh, WINDOW, SETTINGS))  # the `lines` grain reads the roll-up
    source = "raw" if grain == "device" else "auto"
    bill = compute_bill(wh, WINDOW, SETTINGS, by=("claim", "device_class"), source=source,
                        grain=grain)  # type: ignore[arg-type]
    assert bill.source == ("raw" if grain == "device" else "rollup")
    got = bill.lines.filter(pl.col("claim").is_not_null())
    expected: dict[Any, float] = {}
    for c in CLAIMS:
        share = 1.0 if c.profile is None else int(c.profile[0]) / 7
        expected[(f"{c.namespace}/{c.name}", c.device_class)] = share * (c.end - c.start) / 60
    pairs = {(r["claim"], r["device_class"]): r["card_hours"] for r in got.iter_rows(named=True)}
    assert pairs.keys() == expected.keys()
    for key, hours in expected.items():
        assert pairs[key] == pytest.approx(hours, abs=1e-6), key
