"""Ground truth: every card-hour accounted for, and the samples tell the same story.

Cases: card-hours sum to GPUs x hours exactly (whole days; a window with ragged edges, a
5-minute step and a MIG reconfiguration mid-hour); every card's shares sum to one in every
hour; shares follow the rules (MIG compute/7, time-slice 1/replicas, vGPU the larger of HAMi's
allocated cores / 100 and MiB / card MiB);
unallocated capacity shows as free cards, stranded MIG slices and unused replicas; teams are
null exactly for unlabeled namespaces; card-hours and idle card-hours computed independently
from the samples agree with the truth within 0.5%; the idle threshold and run length are
parameters that change the answer.
"""

from __future__ import annotations

import json
from datetime import timedelta

import polars as pl
import pytest

from gpuledger.core.mig import COMPUTE_SLICES, parse_profile_name
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from tests.simulator import independent
from tests.simulator.conftest import START

STEP = timedelta(minutes=1)


def test_card_hours_equal_gpus_times_hours(tiny_sim, tiny_truth):
    assert tiny_sim.gpu_count == 14
    assert tiny_truth["card_hours"].sum() == pytest.approx(14 * 48, rel=1e-12)


def test_ragged_window_with_reconfiguration():
    spec = FleetSpec.default(gpus=10, gpus_per_node=2, scenario={"mig_reconfigure": True})
    window = Window(START + timedelta(minutes=15), START + timedelta(hours=7, minutes=45),
                    timedelta(minutes=5))
    sim = Simulation(spec, window, seed=3)
    truth = sim.ground_truth()
    assert truth["card_hours"].sum() == pytest.approx(10 * window.hours, rel=1e-12)
    per_card_hour = truth.group_by("ts", "uuid").agg(pl.sum("card_hours"))
    first, last = window.start.replace(minute=0), window.end.replace(minute=0)
    edge = {first: 0.75, last: 0.75}
    for ts, _, hours in per_card_hour.iter_rows():
        assert hours == pytest.approx(edge.get(ts, 1.0), abs=1e-9)
    # The reconfigured card shows both layouts in the hour of the change.
    mig = sim.inventory()["mig_instances"]
    changed = mig.filter(pl.col("end_ts") < window.end)
    assert changed.height and changed["end_ts"].dt.minute().unique().to_list() == [30]
    at = changed["end_ts"][0].replace(minute=0)
    uuid = changed["uuid"][0]
    profiles = truth.filter((pl.col("ts") == at) & (pl.col("uuid") == uuid))["profile"].drop_nulls()
    assert set(profiles) == set(mig.filter(pl.col("uuid") == uuid)["profile"])


def test_shares_sum_to_one_per_card_hour(tiny_truth):
    per = tiny_truth.group_by("ts", "uuid").agg(pl.sum("card_hours"))
    assert per["card_hours"].min() == pytest.approx(1.0) and per["card_hours"].max() == pytest.approx(1.0)


def test_share_rules(tiny_truth, tiny_inventory):
    gpus = tiny_inventory["gpus"].select("uuid", "replicas")
    rows = tiny_truth.filter(pl.col("allocation_state") != "stranded").join(gpus, on="uuid")
    hami = tiny_inventory["vgpu_allocations"]
    cores = {
        pod: max(c / 100, m / card)
        for pod, c, m, card in hami.select("pod", "cores_pct", "mem_mib", "card_mem_mib").iter_rows()
    }
    assert {r for req in tiny_inventory["pods"]["gpu_requests"] for r in json.loads(req) if "gpu" in r} >= {
        "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"}
    for row in rows.iter_rows(named=True):
        mode = row["sharing_mode"]
        if mode == "exclusive":
            expected = 1.0
        elif mode == "mig":
            expected = parse_profile_name(row["profile"])[0] / COMPUTE_SLICES
        elif mode == "timeslice":
            expected = 1 / row["replicas"]
        elif row["pod"] is not None:
            expected = cores[row["pod"]]
        else:
            continue
        assert row["share"] == pytest.approx(expected), row
        assert row["card_hours"] == pytest.approx(row["held_hours"] * row["share"])


def test_unallocated_capacity_is_visible(tiny_truth):
    free = tiny_truth.filter(pl.col("allocation_state") == "unallocated")
    stranded = tiny_truth.filter(pl.col("allocation_state") == "stranded")
    assert free["namespace"].null_count() == free.height and free["pod"].null_count() == free.height
    assert set(free["sharing_mode"]) >= {"timeslice", "mig"}
    assert free.filter(pl.col("sharing_mode") == "timeslice")["vgpu"].null_count() == 0
    # The second MIG node's 3g.40gb x2 layout uses 6 of 7 compute slices.
    assert stranded.height and set(stranded["sharing_mode"]) == {"mig"}
    assert stranded["share"].unique().to_list() == [pytest.approx(1 / 7)]
    assert (stranded["idle_card_hours"] == 0).all() and stranded["gpu_i_id"].unique().to_list() == [-1]


def test_teams_null_only_for_unlabeled(tiny_truth, tiny_inventory):
    held = tiny_truth.filter(pl.col("allocation_state") == "allocated")
    labeled = dict(tiny_inventory["namespaces"].select("namespace", "team").iter_rows())
    for ns, team in held.select("namespace", "team").unique().iter_rows():
        assert team == labeled[ns]
    assert held["queue"].drop_nulls().unique().sort().to_list() == ["batch", "train"]
    assert set(held["workload_class"]) == {"training", "inference", "notebook", "batch_eval", "small_job"}


def test_samples_agree_with_truth(tiny_samples, tiny_truth, tiny_inventory):
    held = independent.shares(tiny_samples["gpu_samples"], tiny_inventory["gpus"], tiny_inventory["vgpu_allocations"])
    truth = tiny_truth.filter(pl.col("allocation_state") == "allocated")
    assert independent.card_hours(held, STEP) == pytest.approx(truth["card_hours"].sum(), rel=0.005)
    idle = independent.idle_card_hours(held, STEP)
    assert idle > 0
    assert idle == pytest.approx(truth["idle_card_hours"].sum(), rel=0.005)
    # Active ratio: the mean GR_ENGINE_ACTIVE of held samples, weighted by held hours.
    weighted = (truth["active_ratio"] * truth["held_hours"]).sum() / truth["held_hours"].sum()
    assert held["gr_engine_active"].mean() == pytest.approx(weighted, rel=0.005)


def test_idle_parameters_matter(tiny_spec):
    window = Window(START, START + timedelta(hours=12))
    base = Simulation(tiny_spec, window, seed=7).ground_truth()["idle_card_hours"].sum()
    none = Simulation(tiny_spec, window, seed=7, idle_threshold=0.0).ground_truth()
    longer = Simulation(tiny_spec, window, seed=7, idle_min_minutes=120).ground_truth()
    assert base > 0
    assert none["idle_card_hours"].sum() == 0
    assert 0 < longer["idle_card_hours"].sum() < base
