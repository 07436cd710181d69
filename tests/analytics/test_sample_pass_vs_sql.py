"""The Polars sample pass (`analytics.sampling.sweep`, decision 0122) against the SQL statement it
replaced (frozen in `bench/sampling_sql_before.py`): an independent formulation of the same
model, so equal frames mean the rewrite kept the model. Both run under the hole rule the SQL was
written for (`card-next-scrape-v1`); the current rule's split of a hole at a holder change
(decision 0168) is checked by hand in `test_sampling_model.py`.

Equal means: the same rows, keys, hours (each an exact integer sum of microseconds divided by
3.6e9) and flags bit for bit; the two float averages (`active_ratio`, `active_mean`) within
1e-12 relative, since both engines sum floats in their own order (the SQL statement is not even
bit-reproducible between two of its own runs).

Fleets: the simulator's 40 cards with scrape gaps and a MIG reconfiguration (every sharing
mode) over a day with data on both sides; and hand-built rows for the paths the simulator
rarely takes: a holder back on a device after another within the staleness bound with a field
missing (its carry reaches back over the other holder), duplicate rows of one device at one
time (HA replicas), NaN and negative readings, two MIG devices of one card scraped at different
seconds (the card's next scrape is another device's), a lone sample (fallback spacing), an old
exporter with GPU_UTIL only and gaps in it (its carry decides activity).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import polars as pl
import pytest

from bench import sampling_sql_before as before
from bench.sampling_params import params
from gpuledger.analytics.sampling import holders, results, sweep
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.core.rules import HOLE_RULE_V1, SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.builders import T0, gpus, namespaces
from tests.analytics.pass_fleet import DAY, START, assert_same, simulated_fleet

RULES = replace(SamplingRules.of(Settings()), hole_rule=HOLE_RULE_V1)
"""The SQL statement is frozen at the hole rule of its day (`card-next-scrape-v1`); the pass still
computes under it (decision 0168), so the two formulations stay comparable."""
KEYS = {"hourly": ["hour", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"],
        "allocations": ["start_us", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"],
        "idle": ["start_us", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"]}


def both(wh: Warehouse, window: Window) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
    p = params(window, RULES)
    pieces = sweep.run(wh, window, RULES)
    return {
        "hourly": (results.hourly(pieces), wh.query(before.HOURLY_SQL, p)),
        "allocations": (results.allocations(pieces), wh.query(before.ALLOCATIONS_SQL, p)),
        "idle": (results.idle_pieces(pieces), wh.query(before.IDLE_RUNS_SQL, p)),
    }


def test_simulated_fleet_every_sharing_mode(monkeypatch: pytest.MonkeyPatch):
    # The frozen statement predates HAMi's holders (step 1b, decision 0160): both run without
    # them, so HAMi's cards are what the statement saw, one unheld series each. The step has
    # its own cases (tests/collectors/test_hami_conformance.py, tests/field).
    monkeypatch.setattr(holders, "vgpu_allocations_between",
                        lambda *_: pl.DataFrame(schema=polars_schema(VGPU_ALLOCATIONS)))
    with simulated_fleet() as wh:
        for window in (DAY, Window(START + timedelta(hours=11), START + timedelta(hours=12))):
            frames = both(wh, window)
            assert frames["hourly"][1].height > 40 and frames["allocations"][1].height > 10
            for name, (new, old) in frames.items():
                assert_same(new, old, KEYS[name])


def _row(uuid: str, seconds: float, pod: str | None, act: Any, fb: Any, **labels: Any) -> dict[str, Any]:
    return {
        "ts": T0 + timedelta(seconds=seconds), "node": labels.get("node", "node-a"), "uuid": uuid,
        "gpu_i_id": labels.get("gpu_i_id", -1), "mig_profile": labels.get("profile"), "vgpu": None,
        "namespace": "ml" if pod else None, "pod": pod, "container": "main" if pod else None,
        "gr_engine_active": act, "sm_active": None, "gpu_util": labels.get("util"), "fb_used_mib": fb,
        "fb_free_mib": None, "power_w": None, "tensor_active": None, "dram_active": None,
        "gpu_temp_c": None,
    }


def _hand_rows() -> list[dict[str, Any]]:
    m = 60.0
    rows = [_row("GPU-1", k * m, "a", 0.01, 2000.0) for k in range(40, 58)]  # idle holder a
    rows.append(_row("GPU-1", 58 * m, "b", 0.9, 9000.0))  # b between a's stretches
    rows += [_row("GPU-1", k * m, "a", None, 2000.0) for k in (59, 60, 61, 62)]  # a back, no activity
    rows += [_row("GPU-1", 45 * m, "a", 0.02, 2500.0, node="node-b")]  # an HA duplicate row
    rows += [_row("GPU-2", k * m, "c", float("nan") if k % 7 == 0 else -1.0 if k % 11 == 0 else 0.5,
                  30000.0, util=40.0 if k % 5 == 0 else None) for k in range(0, 120)]
    for gi, offset in ((1, 0.0), (2, 17.0)):  # two MIG devices of one card, scraped apart
        rows += [_row("GPU-3", k * m + offset, f"mig{gi}", 0.0 if k < 50 else 0.3, 500.0 * gi,
                      gpu_i_id=gi, profile="3g.40gb") for k in range(0, 90) if k % 13 != gi]
    rows.append(_row("GPU-4", 30 * m, "lone", 0.2, 100.0))
    rows += [_row("GPU-5", k * m, "u", None, 700.0, util=None if k % 4 == 0 else 2.0 if k < 70 else 60.0)
             for k in range(0, 110) if k % 9 != 0]  # an old exporter: GPU_UTIL only, with gaps
    return rows


@pytest.mark.parametrize("hours", [(0, 2), (1, 2)])
def test_hand_built_edge_cases(tmp_path, hours):
    frame = pl.DataFrame(_hand_rows(), schema=polars_schema(TABLES["gpu_samples"]))
    inventory = {"gpus": gpus(*({"uuid": f"GPU-{i}"} for i in range(1, 6))),
                 "namespaces": namespaces({"ml": "vision"})}
    window = Window(T0 + timedelta(hours=hours[0]), T0 + timedelta(hours=hours[1]))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(LoadBatch(inventory))
        wh.load(LoadBatch({"gpu_samples": frame}, window=Window(T0, T0 + timedelta(hours=3))))
        frames = both(wh, window)
        for name, (new, old) in frames.items():
            assert_same(new, old, KEYS[name])
    hourly = frames["hourly"][0]
    # a's minutes 59-62 (its only rows after minute 59) carry its activity from minute 57
    # (within 5 min, over b's minute 58): the hour from minute 60 is known idle, not unknown.
    hour_1 = int(T0.timestamp() * 1_000_000) + 3_600_000_000
    a_hour_1 = hourly.filter((pl.col("pod") == "a") & (pl.col("hour") == hour_1))
    assert a_hour_1.height == 1 and a_hour_1["active_ratio"].item() == pytest.approx(0.01)
    assert set(hourly["pod"].unique()) >= {"a", "c", "mig1", "mig2", "u"}
