"""Hand-computed bills, each from a small table of sample segments (1-minute samples).

Prices: H100-80GB 3.00/card-hour; discounts exclusive 1.0, mig 0.9, timeslice 0.8, vgpu 0.85.

Cases (conservation is checked on every bill by the `make_bill` fixture):
- a whole GPU held 3 h (1.5 h of it idle with memory in use) next to a free GPU;
- MIG slices of mixed profiles (3g + 2g + 1g + 1g, compute basis), with the sharing discount line;
- stranded MIG capacity (3g + 3g leaves 1/7 of the card nobody can hold);
- MIG `max_normalized` basis (4g + 3g would sum to 15/14 of the card);
- MIG memory basis;
- a time-sliced card (4 replicas) shared by 3 pods;
- HAMi vGPU shares from declared gpucores / gpumem;
- a price change at midnight in the middle of the window;
- a pod that restarts (5 free minutes in between) and its two allocation runs;
- a short scrape gap (bridged) and a long one (not bridged);
- a MIG reconfiguration at minute 30 (7g, then 4g + 3g);
- an unlabeled namespace, a namespace the inventory never saw, and a fallback rule;
- idle: a 25-minute dip is not idle, GPU_UTIL fallback, held idle vs idle with memory freed;
- utilization-weighted billing for one pool;
- redistribution of unallocated cost: proportional and even.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from gpuledger.analytics.usage.rollup import allocations_frame
from gpuledger.core.config import (
    FallbackRule,
    IdleSettings,
    PriceEntry,
    Settings,
    SharingSettings,
    TeamSettings,
)
from gpuledger.core.rules import Rules
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import (
    Seg,
    at,
    gpus,
    mig_instances,
    namespaces,
    pods,
    samples,
    window,
)
from tests.analytics.conftest import by_team

H100 = 3.00


def test_whole_gpu_with_idle_half_and_a_free_card(make_bill):
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}, {"uuid": "GPU-2", "gpu_index": 1}),
        "gpu_samples": samples([
            Seg("GPU-1", at(0), at(1, 30), "ml", "p1", act=0.6),
            Seg("GPU-1", at(1, 30), at(3), "ml", "p1", act=0.01, fb=30_000),
            Seg("GPU-2", at(0), at(3), act=0.0, fb=0),
        ]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(3), frames)
    lines = by_team(bill)
    assert lines["vision"]["card_hours"] == pytest.approx(3.0)
    assert lines["vision"]["cost"] == 9.00
    assert lines["vision"]["idle_card_hours"] == pytest.approx(1.5)
    assert lines["vision"]["held_idle_card_hours"] == pytest.approx(1.5)
    assert lines["vision"]["idle_cost"] == 4.50
    assert lines["unallocated"]["card_hours"] == pytest.approx(3.0)
    assert lines["unallocated"]["cost"] == 9.00
    assert bill.fleet_cost == 18.00
    assert bill.fleet_card_hours == pytest.approx(6.0)


def _mig(uuid: str, gi: int, profile: str, start, end, ns=None, pod=None) -> Seg:  # noqa: PLR0917
    return Seg(uuid, start, end, ns, pod, gpu_i_id=gi, profile=profile)


def test_mig_mixed_profiles_compute_basis(make_bill):
    # H100: 3g.40gb (gi 1), 2g.20gb (gi 5), 1g.10gb (gi 13, 14); shares 3/7, 2/7, 1/7, 1/7.
    frames = {
        "gpus": gpus({"uuid": "GPU-M", "sharing_mode": "mig"}),
        "gpu_samples": samples([
            _mig("GPU-M", 1, "3g.40gb", at(0), at(2), "a-ns", "a1"),
            _mig("GPU-M", 5, "2g.20gb", at(0), at(2), "b-ns", "b1"),
            _mig("GPU-M", 13, "1g.10gb", at(0), at(1), "c-ns", "c1"),
            _mig("GPU-M", 13, "1g.10gb", at(1), at(2)),
            _mig("GPU-M", 14, "1g.10gb", at(0), at(2)),
        ]),
        "namespaces": namespaces({"a-ns": "a", "b-ns": "b", "c-ns": "c"}),
        "mig_instances": mig_instances(
            ("GPU-M", 1, "3g.40gb", at(0), at(2)), ("GPU-M", 5, "2g.20gb", at(0), at(2)),
            ("GPU-M", 13, "1g.10gb", at(0), at(2)), ("GPU-M", 14, "1g.10gb", at(0), at(2)),
        ),
    }
    bill = make_bill(window(2), frames)
    lines = by_team(bill)
    # a: 2 h x 3/7 = 6/7 card-hours; list 6/7 x 3 = 2.5714; 10 % discount 0.2571 -> 2.31
    assert lines["a"]["card_hours"] == pytest.approx(6 / 7)
    assert lines["a"]["list_cost"] == 2.57
    assert lines["a"]["sharing_discount"] == 0.26
    assert lines["a"]["cost"] == 2.31
    assert lines["b"]["card_hours"] == pytest.approx(4 / 7)
    assert lines["b"]["cost"] == pytest.approx(4 / 7 * 3 * 0.9, abs=0.006)
    assert lines["c"]["card_hours"] == pytest.approx(1 / 7)
    # unallocated: 2 h - 11/7 held = 3/7 (both 1g slices' free time), nothing stranded
    assert lines["unallocated"]["card_hours"] == pytest.approx(3 / 7)
    assert bill.unallocated["stranded_card_hours"].sum() == pytest.approx(0.0)
    # discount line funds 10 % of 11/7 card-hours at 3.00
    assert lines["sharing_discount"]["cost"] == pytest.approx(11 / 7 * 3 * 0.1, abs=0.006)
    assert bill.fleet_cost == 6.00


def test_stranded_mig_capacity(make_bill):
    frames = {
        "gpus": gpus({"uuid": "GPU-S", "sharing_mode": "mig"}),
        "gpu_samples": samples([
            _mig("GPU-S", 1, "3g.40gb", at(0), at(1), "a-ns", "a1"),
            _mig("GPU-S", 2, "3g.40gb", at(0), at(1), "a-ns", "a2"),
        ]),
        "namespaces": namespaces({"a-ns": "a"}),
        "mig_instances": mig_instances(
            ("GPU-S", 1, "3g.40gb", at(0), at(1)), ("GPU-S", 2, "3g.40gb", at(0), at(1)),
        ),
    }
    bill = make_bill(window(1), frames)
    lines = by_team(bill)
    assert lines["a"]["card_hours"] == pytest.approx(6 / 7)
    assert lines["unallocated"]["card_hours"] == pytest.approx(1 / 7)
    assert bill.unallocated["stranded_card_hours"].sum() == pytest.approx(1 / 7)


def test_mig_max_normalized_basis(make_bill):
    # 4g.40gb: max(4/7, 4/8) = 8/14; 3g.40gb: max(3/7, 4/8) = 7/14; sum 15/14 -> 8/15 and 7/15.
    frames = {
        "gpus": gpus({"uuid": "GPU-N", "sharing_mode": "mig"}),
        "gpu_samples": samples([
            _mig("GPU-N", 1, "4g.40gb", at(0), at(1), "a-ns", "a1"),
            _mig("GPU-N", 2, "3g.40gb", at(0), at(1), "b-ns", "b1"),
        ]),
        "namespaces": namespaces({"a-ns": "a", "b-ns": "b"}),
        "mig_instances": mig_instances(
            ("GPU-N", 1, "4g.40gb", at(0), at(1)), ("GPU-N", 2, "3g.40gb", at(0), at(1)),
        ),
    }
    settings = Settings(sharing=SharingSettings(mig_share_basis="max_normalized"))
    lines = by_team(make_bill(window(1), frames, settings))
    assert lines["a"]["card_hours"] == pytest.approx(8 / 15)
    assert lines["b"]["card_hours"] == pytest.approx(7 / 15)
    assert "unallocated" not in lines


def test_mig_memory_basis(make_bill):
    # 1g.20gb occupies 2 of 8 memory slices: 1/4 of the card (compute basis would say 1/7).
    frames = {
        "gpus": gpus({"uuid": "GPU-Q", "sharing_mode": "mig"}),
        "gpu_samples": samples([_mig("GPU-Q", 3, "1g.20gb", at(0), at(2), "a-ns", "a1")]),
        "namespaces": namespaces({"a-ns": "a"}),
    }
    settings = Settings(sharing=SharingSettings(mig_share_basis="memory"))
    lines = by_team(make_bill(window(2), frames, settings))
    assert lines["a"]["card_hours"] == pytest.approx(0.5)


def test_time_sliced_card_shared_by_three_pods(make_bill):
    # 4 replicas: each pod holds 1/4; p1, p2 for 2 h, p3 for 1 h; 0.8 timeslice factor.
    frames = {
        "gpus": gpus({"uuid": "GPU-T", "sharing_mode": "timeslice", "replicas": 4}),
        "gpu_samples": samples([
            Seg("GPU-T", at(0), at(2), "x-ns", "p1", act=0.4, vgpu="0"),
            Seg("GPU-T", at(0), at(2), "x-ns", "p2", act=0.4, vgpu="1"),
            Seg("GPU-T", at(0), at(1), "y-ns", "p3", act=0.4, vgpu="2"),
        ]),
        "namespaces": namespaces({"x-ns": "x", "y-ns": "y"}),
    }
    bill = make_bill(window(2), frames)
    lines = by_team(bill)
    assert lines["x"]["card_hours"] == pytest.approx(1.0)
    assert lines["x"]["list_cost"] == 3.00
    assert lines["x"]["cost"] == 2.40
    assert lines["y"]["card_hours"] == pytest.approx(0.25)
    assert lines["y"]["cost"] == 0.60
    assert lines["unallocated"]["card_hours"] == pytest.approx(0.75)
    assert lines["sharing_discount"]["cost"] == 0.75
    assert bill.detail.filter(bill.detail["kind"] == "allocated")["share"].to_list() == [0.25] * 3


def test_vgpu_declared_fraction(make_bill):
    # gpucores 30 % with 20 GiB of 80 GiB (25 %) -> 0.30; gpucores 20 % with 40 GiB -> 0.50.
    frames = {
        "gpus": gpus({"uuid": "GPU-V", "sharing_mode": "vgpu"}),
        "gpu_samples": samples([
            Seg("GPU-V", at(0), at(2), "x-ns", "v1", vgpu="0"),
            Seg("GPU-V", at(0), at(2), "y-ns", "v2", vgpu="1"),
        ]),
        "namespaces": namespaces({"x-ns": "x", "y-ns": "y"}),
        "pods": pods(
            {"namespace": "x-ns", "pod": "v1", "gpu_requests": json.dumps(
                {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 20480})},
            {"namespace": "y-ns", "pod": "v2", "gpu_requests": json.dumps(
                {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 20, "nvidia.com/gpumem": 40960})},
        ),
    }
    lines = by_team(make_bill(window(2), frames))
    assert lines["x"]["card_hours"] == pytest.approx(0.6)
    assert lines["x"]["cost"] == pytest.approx(0.6 * 3 * 0.85, abs=0.005)
    assert lines["y"]["card_hours"] == pytest.approx(1.0)
    assert lines["unallocated"]["card_hours"] == pytest.approx(0.4)


def test_price_change_mid_window(make_bill):
    # 3.00 until 16 Nov, 4.00 from 16 Nov 00:00; the pod holds 22:00 -> 02:00 across midnight.
    settings = Settings(price_book=(
        PriceEntry(model="H100-80GB", unit_price=3.0),
        PriceEntry(model="H100-80GB", unit_price=4.0, effective_from=date(2026, 11, 16)),
    ))
    start = at(22, days=14)
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}),
        "gpu_samples": samples([Seg("GPU-1", start, at(2, days=15), "ml", "p1")]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(4, start), frames, settings, by=("team", "day"))
    days = {(r["team"], r["day"]): r for r in bill.lines.iter_rows(named=True)}
    assert days[("vision", date(2026, 11, 15))]["cost"] == 6.00
    assert days[("vision", date(2026, 11, 16))]["cost"] == 8.00
    assert bill.fleet_cost == 14.00


def test_pod_restart_and_its_allocation_runs(make_bill, tmp_path):
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}),
        "gpu_samples": samples([
            Seg("GPU-1", at(0), at(0, 40), "ml", "p1"),
            Seg("GPU-1", at(0, 40), at(0, 45)),
            Seg("GPU-1", at(0, 45), at(2), "ml", "p1"),
        ]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(2), frames)
    lines = by_team(bill)
    assert lines["vision"]["card_hours"] == pytest.approx(115 / 60)
    assert lines["unallocated"]["card_hours"] == pytest.approx(5 / 60)
    from tests.analytics.builders import load

    path = load(tmp_path / "restart.duckdb", window(2), frames)
    with Warehouse.open(path, read_only=True) as wh:
        runs = allocations_frame(wh, window(2), Rules.of(Settings()))
    assert runs.select("ts", "end_ts").rows() == [(at(0), at(0, 40)), (at(0, 45), at(2))]


def test_short_scrape_gap_is_bridged_long_gap_is_not(make_bill):
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}, {"uuid": "GPU-2", "gpu_index": 1}),
        "gpu_samples": samples([
            Seg("GPU-1", at(0), at(1), "ml", "p1"),          # 40-minute gap: bridged
            Seg("GPU-1", at(1, 40), at(3), "ml", "p1"),
            Seg("GPU-2", at(0), at(1), "ml", "p2"),          # 90-minute gap: not bridged
            Seg("GPU-2", at(2, 30), at(3), "ml", "p2"),
        ]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(3), frames, by=("team", "uuid"))
    rows = {(r["team"], r["uuid"]): r["card_hours"] for r in bill.lines.iter_rows(named=True)}
    assert rows[("vision", "GPU-1")] == pytest.approx(3.0)
    assert rows[("vision", "GPU-2")] == pytest.approx(1.5)
    assert rows[("unallocated", "GPU-2")] == pytest.approx(1.5)
    # With a 30-minute tolerance the 40-minute gap ends the allocation too.
    strict = Settings(idle=IdleSettings(gap_tolerance_s=1800))
    bill = make_bill(window(3), frames, strict, by=("team", "uuid"))
    rows = {(r["team"], r["uuid"]): r["card_hours"] for r in bill.lines.iter_rows(named=True)}
    assert rows[("vision", "GPU-1")] == pytest.approx(3.0 - 40 / 60)


def test_mig_reconfiguration_mid_hour(make_bill):
    # 00:00-00:30 7g.80gb (gi 0) held by p1; then 4g.40gb (gi 1, free) + 3g.40gb (gi 2) held by p2.
    frames = {
        "gpus": gpus({"uuid": "GPU-R", "sharing_mode": "mig"}),
        "gpu_samples": samples([
            _mig("GPU-R", 0, "7g.80gb", at(0), at(0, 30), "a-ns", "p1"),
            _mig("GPU-R", 1, "4g.40gb", at(0, 30), at(2)),
            _mig("GPU-R", 2, "3g.40gb", at(0, 30), at(2), "b-ns", "p2"),
        ]),
        "namespaces": namespaces({"a-ns": "a", "b-ns": "b"}),
        "mig_instances": mig_instances(
            ("GPU-R", 0, "7g.80gb", at(0), at(0, 30)),
            ("GPU-R", 1, "4g.40gb", at(0, 30), at(2)), ("GPU-R", 2, "3g.40gb", at(0, 30), at(2)),
        ),
    }
    bill = make_bill(window(2), frames, by=("team", "profile"))
    lines = by_team(bill)
    assert lines["a"]["card_hours"] == pytest.approx(0.5)
    assert lines["a"]["profile"] == "7g.80gb"
    assert lines["b"]["card_hours"] == pytest.approx(1.5 * 3 / 7)
    assert lines["unallocated"]["card_hours"] == pytest.approx(1.5 * 4 / 7)
    assert bill.unallocated["stranded_card_hours"].sum() == pytest.approx(0.0)
    hours = bill.detail.filter(bill.detail["team"] == "a")
    assert hours["card_hours"].sum() == pytest.approx(0.5)


def test_unlabeled_namespaces_are_unattributed_and_listed(make_bill):
    settings = Settings(teams=TeamSettings(fallback=(
        FallbackRule(namespace_regex=r"team-(\w+)-dev", team=r"\1"),
    )))
    frames = {
        "gpus": gpus(*({"uuid": f"GPU-{i}", "gpu_index": i} for i in range(4))),
        "gpu_samples": samples([
            Seg("GPU-0", at(0), at(1), "ml", "p1"),
            Seg("GPU-1", at(0), at(1), "scratch", "p2"),       # in inventory, no label
            Seg("GPU-2", at(0), at(1), "ghost", "p3"),         # never inventoried
            Seg("GPU-3", at(0), at(1), "team-rocket-dev", "p4"),  # fallback rule
        ]),
        "namespaces": namespaces({"ml": "vision", "scratch": None}),
    }
    bill = make_bill(window(1), frames, settings)
    lines = by_team(bill)
    assert lines["unattributed"]["card_hours"] == pytest.approx(2.0)
    assert lines["unattributed"]["cost"] == 6.00
    assert lines["rocket"]["card_hours"] == pytest.approx(1.0)
    assert bill.unattributed_namespaces == ("ghost", "scratch")
    assert bill.to_dict()["unattributed_namespaces"] == ["ghost", "scratch"]


def test_idle_rules(make_bill):
    frames = {
        "gpus": gpus(*({"uuid": f"GPU-{i}", "gpu_index": i} for i in range(3))),
        "gpu_samples": samples([
            # GPU-0: a 25-minute dip (not idle), then a 35-minute idle run, memory in use.
            Seg("GPU-0", at(0), at(0, 25), "ml", "p0", act=0.01, fb=9000),
            Seg("GPU-0", at(0, 25), at(1, 25), "ml", "p0", act=0.7),
            Seg("GPU-0", at(1, 25), at(2), "ml", "p0", act=0.02, fb=9000),
            # GPU-1: no GR_ENGINE_ACTIVE; GPU_UTIL 3 % -> idle for 2 h, memory freed.
            Seg("GPU-1", at(0), at(2), "ml", "p1", act=None, util=3.0, fb=100),
            # GPU-2: GPU_UTIL 40 % -> busy.
            Seg("GPU-2", at(0), at(2), "ml", "p2", act=None, util=40.0),
        ]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(2), frames, by=("team", "uuid"))
    rows = {r["uuid"]: r for r in bill.lines.iter_rows(named=True) if r["team"] == "vision"}
    assert rows["GPU-0"]["idle_card_hours"] == pytest.approx(35 / 60)
    assert rows["GPU-0"]["held_idle_card_hours"] == pytest.approx(35 / 60)
    assert rows["GPU-1"]["idle_card_hours"] == pytest.approx(2.0)
    assert rows["GPU-1"]["held_idle_card_hours"] == pytest.approx(0.0)
    assert rows["GPU-2"]["idle_card_hours"] == pytest.approx(0.0)


def test_utilization_weighted_pool(make_bill):
    # Pool "research" bills by utilization: 2 h at 25 % activity pays 0.5 card-hours' worth.
    settings = Settings(sharing=SharingSettings(pool_billing_basis={"research": "utilization"}))
    frames = {
        "gpus": gpus({"uuid": "GPU-1", "pool": "research"}, {"uuid": "GPU-2", "gpu_index": 1}),
        "gpu_samples": samples([
            Seg("GPU-1", at(0), at(2), "ml", "p1", act=0.25),
            Seg("GPU-2", at(0), at(2), "ml", "p2", act=0.25),
        ]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    bill = make_bill(window(2), frames, settings, by=("team", "pool"))
    rows = {(r["team"], r["pool"]): r for r in bill.lines.iter_rows(named=True)}
    research = rows[("vision", "research")]
    assert research["card_hours"] == pytest.approx(2.0)
    assert research["list_cost"] == 6.00
    assert research["utilization_adjustment"] == -4.50
    assert research["cost"] == 1.50
    assert rows[("vision", "default")]["cost"] == 6.00
    assert rows[("unallocated", "research")]["cost"] == 4.50
    assert rows[("unallocated", "research")]["card_hours"] == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("policy", "a_moved", "b_moved"),
    [("none", 0.0, 0.0), ("proportional", 2.0, 1.0), ("even", 1.5, 1.5)],
)
def test_redistribution_moves_cost_not_card_hours(make_bill, policy, a_moved, b_moved):
    # a holds 2 card-hours (6.00), b 1 (3.00); one card-hour (3.00) is unallocated.
    settings = Settings(idle=IdleSettings(unallocated_redistribution=policy))
    frames = {
        "gpus": gpus(*({"uuid": f"GPU-{i}", "gpu_index": i} for i in range(2))),
        "gpu_samples": samples([
            Seg("GPU-0", at(0), at(2), "a-ns", "p1"),
            Seg("GPU-1", at(0), at(1), "b-ns", "p2"),
        ]),
        "namespaces": namespaces({"a-ns": "a", "b-ns": "b"}),
    }
    lines = by_team(make_bill(window(2), frames, settings))
    assert lines["a"]["redistributed_cost"] == a_moved
    assert lines["b"]["redistributed_cost"] == b_moved
    assert lines["a"]["cost"] == 6.00 + a_moved
    assert lines["unallocated"]["card_hours"] == pytest.approx(1.0)
    assert lines["unallocated"]["cost"] == pytest.approx(3.00 - a_moved - b_moved)
