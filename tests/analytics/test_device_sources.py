"""The device-source seam: one source per sharing mode, tried in registry order.

Cases: each held row gets the mode of the first source that claims it (a MIG instance id wins
over the card's mode, an unknown card mode is a whole card); each source's share on a
hand-built frame (whole 1, time-slice 1/replicas with the inventory's replicas or the replicas
seen, vGPU the declared fraction else 1/replicas, MIG compute slices / 7 and memory slices / 8);
`source_for` names the known modes; the pod-derived holder modes are the card-level shared ones
but HAMi's (its holders come from its allocations).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpuledger.analytics.devices.base import ShareInputs
from gpuledger.analytics.devices.registry import (
    SOURCES,
    pod_holder_modes,
    sharing_mode_expr,
    source_for,
    with_shares,
)
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.rules import ShareRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

TS = datetime(2026, 11, 1, tzinfo=UTC)
ROWS: list[dict[str, Any]] = [
    # name, gpu_i_id, card_mode, vgpu, profile, replicas, req_cores, req_mem_mib, memory_mib
    dict(name="whole", gpu_i_id=-1, card_mode="exclusive", vgpu=None, profile=None, replicas=None),
    dict(name="odd", gpu_i_id=-1, card_mode="something-new", vgpu=None, profile=None, replicas=None),
    dict(name="mig", gpu_i_id=1, card_mode="timeslice", vgpu=None, profile="3g.40gb", replicas=None),
    dict(name="ts4", gpu_i_id=-1, card_mode="timeslice", vgpu="0", profile=None, replicas=4),
    dict(name="ts_seen", gpu_i_id=-1, card_mode="timeslice", vgpu="0", profile=None, replicas=None),
    dict(name="ts_seen", gpu_i_id=-1, card_mode="timeslice", vgpu="1", profile=None, replicas=None),
    dict(name="vgpu_declared", gpu_i_id=-1, card_mode="vgpu", vgpu="0", profile=None, replicas=2,
         req_cores=30.0),
    dict(name="vgpu_plain", gpu_i_id=-1, card_mode="vgpu", vgpu="1", profile=None, replicas=2),
]


def _frame() -> pl.DataFrame:
    rows = [
        {"uuid": r["name"], "ts": TS, "model": "A100-80GB", "replica_count": 1.0,
         "req_cores": r.get("req_cores"), "req_mem_mib": None, "req_mem_pct": None,
         "memory_mib": 81920.0, **{k: v for k, v in r.items() if k not in ("name", "req_cores")}}
        for r in ROWS
    ]
    return pl.DataFrame(rows, schema_overrides={
        "gpu_i_id": pl.Int32, "replicas": pl.Int64, "req_cores": pl.Float64,
        "req_mem_mib": pl.Float64, "req_mem_pct": pl.Float64, "vgpu": pl.String, "profile": pl.String,
    })


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    """An empty warehouse: no HAMi allocation, so vGPU rows fall back to their requests."""
    with Warehouse.open(tmp_path / "w.duckdb") as opened:
        yield opened


def _inputs(basis: str, wh: Warehouse) -> ShareInputs:
    settings = Settings.model_validate({"sharing": {"mig_share_basis": basis}})
    window = Window(TS, datetime(2026, 11, 2, tzinfo=UTC))
    return ShareInputs(wh=wh, gpus=pl.DataFrame(), window=window, shares=ShareRules.of(settings))


def test_first_claiming_source_sets_the_mode():
    modes = _frame().with_columns(sharing_mode_expr())["sharing_mode"].to_list()
    assert modes == ["exclusive", "exclusive", "mig", "timeslice", "timeslice", "timeslice", "vgpu", "vgpu"]


@pytest.mark.parametrize(("basis", "mig_share"), [("compute", 3 / 7), ("memory", 4 / 8)])
def test_each_source_prices_its_rows(basis, mig_share, wh):
    frame = _frame().with_columns(sharing_mode_expr())
    priced = with_shares(frame, _inputs(basis, wh))
    shares = dict(zip(priced["uuid"] + ":" + priced["vgpu"].fill_null(""), priced["share"], strict=True))
    assert shares == pytest.approx({
        "whole:": 1.0, "odd:": 1.0, "mig:": mig_share, "ts4:0": 0.25, "ts_seen:0": 0.5,
        "ts_seen:1": 0.5, "vgpu_declared:0": 0.3, "vgpu_plain:1": 0.5,
    })


def test_registry_lookup_and_pod_holder_modes():
    assert [s.mode for s in SOURCES] == ["dra", "mig", "timeslice", "vgpu", "exclusive"]
    assert source_for("vgpu").mode == "vgpu" and source_for("dra").mode == "dra"
    with pytest.raises(InputError, match="known: dra, mig, timeslice, vgpu, exclusive"):
        source_for("nvlink")
    assert pod_holder_modes() == ("timeslice",)  # HAMi's holders come from HAMi (decision 0160)


def test_mig_row_without_profile_is_named(wh):
    frame = _frame().with_columns(
        pl.when(pl.col("uuid") == "mig").then(None).otherwise(pl.col("profile")).alias("profile")
    ).with_columns(sharing_mode_expr())
    with pytest.raises(InputError, match="no GPU_I_PROFILE label"):
        with_shares(frame, _inputs("compute", wh))
