"""Two HAMi holders of one card that start at the same time are two rows of `allocations`.

A HAMi card has several holders at once, each on the card's own device (`uuid`, `gpu_i_id` -1,
no `vgpu`: `analytics.sampling.holders`). When `allocations` was keyed on the device alone
(`ts`, `uuid`, `gpu_i_id`, `vgpu`), the load's in-batch dedupe (`warehouse.batch`, last wins)
kept one of the holders starting at one time (at the window's start, at each UTC midnight) and
dropped the others, which one depending on the frame's order of tied rows: rows lost, and two
identical roll-ups storing different tables. The holder is part of the key now.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.core.window import Window
from gpuledger.pipeline import rollup
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.builders import T0, gpus, namespaces

CARD = "GPU-hami-0"
PODS = ("p1", "p2", "p3")


def _samples() -> pl.DataFrame:
    """The card's one unlabeled whole-card series (what dcgm shows of a HAMi card), each minute."""
    rows = [{
        "ts": T0 + timedelta(minutes=k), "node": "node-h", "uuid": CARD, "gpu_i_id": -1,
        "mig_profile": None, "vgpu": None, "namespace": None, "pod": None, "container": None,
        "gr_engine_active": 0.5, "sm_active": None, "gpu_util": None, "fb_used_mib": 4000.0,
        "fb_free_mib": None, "power_w": None, "tensor_active": None, "dram_active": None,
        "gpu_temp_c": None,
    } for k in range(0, 4 * 60)]
    return pl.DataFrame(rows, schema=polars_schema(TABLES["gpu_samples"]))


def _allocations() -> pl.DataFrame:
    """Three pods on the card from before the window to past its end: each one's allocation
    starts at the window's start."""
    rows = [{
        "uuid": CARD, "namespace": "ml", "pod": pod, "container_index": 0, "source": "api",
        "node": "node-h", "mem_mib": 20000.0, "cores_pct": 30.0, "card_mem_mib": 81920.0,
        "start_ts": T0, "end_ts": T0 + timedelta(hours=4),
    } for pod in PODS]
    return pl.DataFrame(rows, schema=polars_schema(VGPU_ALLOCATIONS))


def test_holders_starting_together_are_each_stored(tmp_path):
    window = Window(T0 + timedelta(hours=1), T0 + timedelta(hours=3))
    stored = []
    for run in range(2):
        with Warehouse.open(tmp_path / f"wh{run}.duckdb") as wh:
            wh.load(LoadBatch({"gpus": gpus({"uuid": CARD, "node": "node-h", "sharing_mode": "vgpu"}),
                               "namespaces": namespaces({"ml": "vision"})}))
            wh.load(LoadBatch({"gpu_samples": _samples()}, window=Window(T0, T0 + timedelta(hours=4))))
            wh.load(LoadBatch({"vgpu_allocations": _allocations()}))
            rollup(wh, window, Settings())
            stored.append(wh.query(
                "SELECT ts, end_ts, uuid, gpu_i_id, vgpu, namespace, pod FROM allocations "
                "ORDER BY ts, pod"))
    frame = stored[0]
    assert frame.height == len(PODS)
    assert frame["pod"].to_list() == list(PODS)
    assert frame["ts"].unique().to_list() == [window.start]
    assert frame["end_ts"].unique().to_list() == [window.end]
    assert frame.equals(stored[1])
