"""Devices and their series look like the real exporters'.

Cases: every card's MIG instances at every instant form a layout `core.mig` accepts, with
unique GPU instance ids, and pods on an instance requested exactly that profile; time-sliced
cards show one series per held replica (vgpu 0..replicas-1) plus one unlabeled series while
nobody holds the card, and with virtual GPUs switched off exactly one series per card and step;
GPU_UTIL is absent exactly on MIG series; free devices carry no pod labels, and a HAMi card's one
series never does (dcgm cannot map HAMi's pods) while it shows the card's activity; scrape gaps remove
whole node blocks from the samples but not from the ground truth.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import polars as pl
import pytest

from gpuledger.core.mig import gpu_model
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from tests.simulator.conftest import START


def test_mig_layouts_valid(tiny_inventory):
    mig = tiny_inventory["mig_instances"].join(tiny_inventory["gpus"].select("uuid", "model"), on="uuid")
    assert mig.height
    for (uuid, model, _start), rows in mig.group_by("uuid", "model", "start_ts"):
        counts = Counter(rows["profile"])
        assert gpu_model(model).validate(dict(counts)), (uuid, counts)
        assert rows["gpu_i_id"].n_unique() == rows.height


def test_pods_hold_the_profile_they_requested(tiny_samples, tiny_inventory):
    requests = dict(tiny_inventory["pods"].select("pod", "gpu_requests").iter_rows())
    held = tiny_samples["gpu_samples"].filter(pl.col("mig_profile").is_not_null() & pl.col("pod").is_not_null())
    assert held.height
    for pod, profile in held.select("pod", "mig_profile").unique().iter_rows():
        assert json.loads(requests[pod]) == {f"nvidia.com/mig-{profile}": 1}


def test_time_slice_series(tiny_samples, tiny_inventory):
    gpus = tiny_inventory["gpus"].filter(pl.col("sharing_mode") == "timeslice")
    replicas = gpus["replicas"][0]
    ts = tiny_samples["gpu_samples"].filter(pl.col("uuid").is_in(gpus["uuid"].implode()))
    held = ts.filter(pl.col("pod").is_not_null())
    assert set(held["vgpu"].cast(pl.Int64)) <= set(range(replicas)) and held["vgpu"].null_count() == 0
    per_step = ts.group_by("ts", "uuid").agg(pl.len().alias("n"), pl.col("pod").null_count().alias("free"))
    assert per_step["n"].max() <= replicas
    # A step with a free series has no held one (the unlabeled series stands for an idle card).
    assert per_step.filter((pl.col("free") > 0) & (pl.col("n") > 1)).height == 0


def test_virtual_gpus_switch(tiny_spec):
    data = tiny_spec.model_dump()
    data["exporter"] = {"virtual_gpus": False}
    window = Window(START, START + timedelta(hours=6))
    sim = Simulation(FleetSpec.parse(data), window, seed=7)
    frames = next(sim.batches(timedelta(hours=6)))[1]["gpu_samples"]
    shared = sim.inventory()["gpus"].filter(pl.col("sharing_mode").is_in(["timeslice", "vgpu"]))
    rows = frames.filter(pl.col("uuid").is_in(shared["uuid"].implode()))
    assert rows["vgpu"].null_count() == rows.height
    assert rows.group_by("ts", "uuid").len()["len"].unique().to_list() == [1]
    assert rows.height == shared.height * 360
    # The ground truth does not depend on how the exporter labels series.
    truth = sim.ground_truth()
    assert truth.filter(pl.col("sharing_mode") == "timeslice")["vgpu"].null_count() == 0


def test_gpu_util_absent_on_mig_only(tiny_samples):
    gpu = tiny_samples["gpu_samples"]
    on_mig = gpu.filter(pl.col("gpu_i_id") >= 0)
    assert on_mig.height and on_mig["gpu_util"].null_count() == on_mig.height
    assert gpu.filter(pl.col("gpu_i_id") < 0)["gpu_util"].null_count() == 0
    assert (on_mig["mig_profile"].null_count(), gpu.filter(pl.col("gpu_i_id") < 0)["mig_profile"].null_count()) \
        == (0, gpu.filter(pl.col("gpu_i_id") < 0).height)


def test_free_devices_have_no_pod_labels(tiny_samples, tiny_inventory):
    hami = tiny_inventory["gpus"].filter(pl.col("sharing_mode") == "vgpu")["uuid"].implode()
    on_hami = tiny_samples["gpu_samples"].filter(pl.col("uuid").is_in(hami))
    assert on_hami.height and on_hami["pod"].null_count() == on_hami["namespace"].null_count() == on_hami.height
    assert on_hami["vgpu"].null_count() == on_hami.height and on_hami.group_by("ts", "uuid").len()["len"].max() == 1
    assert on_hami["gr_engine_active"].max() > 0.1  # the card's activity: its holders' work
    gpu = tiny_samples["gpu_samples"].filter(~pl.col("uuid").is_in(hami))
    free = gpu.filter(pl.col("pod").is_null())
    assert free.height
    assert free["namespace"].null_count() == free["container"].null_count() == free.height
    assert free["gr_engine_active"].max() == 0.0
    assert gpu.filter(pl.col("pod").is_not_null())["namespace"].null_count() == 0


def test_scrape_gaps_drop_samples_not_truth(tiny_spec):
    window = Window(START, START + timedelta(hours=12))
    data = tiny_spec.model_dump()
    data["scenario"] = {"scrape_gaps": 0.2}
    gappy = Simulation(FleetSpec.parse(data), window, seed=7)
    plain = Simulation(tiny_spec, window, seed=7)
    g = next(gappy.batches(timedelta(hours=12)))[1]["gpu_samples"]
    p = next(plain.batches(timedelta(hours=12)))[1]["gpu_samples"]
    assert 0.7 * p.height < g.height < 0.9 * p.height
    # Whole node x 10-minute blocks go missing.
    missing = p.join(g, on=["ts", "uuid", "gpu_i_id", "vgpu"], how="anti", nulls_equal=True)
    blocks = missing.with_columns(pl.col("ts").dt.truncate("10m").alias("block"))
    have = g.with_columns(pl.col("ts").dt.truncate("10m").alias("block")).select("node", "block").unique()
    assert blocks.join(have, on=["node", "block"]).height == 0
    assert gappy.ground_truth()["card_hours"].sum() == pytest.approx(plain.ground_truth()["card_hours"].sum())
