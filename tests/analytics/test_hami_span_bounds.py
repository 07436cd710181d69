"""A HAMi holder is held inside HAMi's own allocation span, even across a dcgm scrape hole.

Decision 0180 (issue 29, traced from `bench_planes`' HAMi plane: team `search` +0.139 %). A HAMi
card's holders come from HAMi's record (`vgpu_allocations`), their readings from the card's one
dcgm series. When dcgm missed the scrape just before a pod's allocation starts, the hole rule
(0168) let the pod's first row reach back over half the hole, although HAMi's record says when
it started; likewise a row stood past the record's end. Cases, a card scraped every minute with
the scrape at minute 10 missed:
- pod b allocated from minute 11 to 20: held 9 minutes, 11 to 20 (no reach back to 10.5),
  where the hole rule alone gives 9.5;
- pod a allocated 0-10 (its end inside the hole): held 10 minutes, not past minute 10;
- under the rule before (v2, still computable) the same rows give b 9.5 minutes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import polars as pl
import pytest

from gpuledger.analytics.sampling.results import held_hourly
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.core.frames_hami import VGPU_ALLOCATIONS
from gpuledger.core.rules import HOLE_RULE_V2, SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import LoadBatch, Warehouse
from tests.analytics.builders import T0, gpus, namespaces

CARD = "GPU-hami-1"
RULES = SamplingRules.of(Settings())


def _samples() -> pl.DataFrame:
    return pl.DataFrame([{
        "ts": T0 + timedelta(minutes=k), "node": "node-h", "uuid": CARD, "gpu_i_id": -1,
        "mig_profile": None, "vgpu": None, "namespace": None, "pod": None, "container": None,
        "gr_engine_active": 0.5, "sm_active": None, "gpu_util": None, "fb_used_mib": 4000.0,
        "fb_free_mib": None, "power_w": None, "tensor_active": None, "dram_active": None,
        "gpu_temp_c": None,
    } for k in range(60) if k != 10], schema=polars_schema(TABLES["gpu_samples"]))


def _allocation(pod: str, start: int, end: int) -> dict[str, object]:
    return {"uuid": CARD, "namespace": "ml", "pod": pod, "container_index": 0, "source": "prometheus",
            "node": "node-h", "mem_mib": 20480.0, "cores_pct": 25.0, "card_mem_mib": 81920.0,
            "start_ts": T0 + timedelta(minutes=start), "end_ts": T0 + timedelta(minutes=end)}


def test_a_hami_holder_stays_inside_its_allocation_span(tmp_path):
    window = Window(T0, T0 + timedelta(hours=1))
    with Warehouse.open(tmp_path / "wh.duckdb") as wh:
        wh.load(LoadBatch({"gpus": gpus({"uuid": CARD, "node": "node-h", "sharing_mode": "vgpu"}),
                           "namespaces": namespaces({"ml": "vision"})}))
        wh.load(LoadBatch({"gpu_samples": _samples()}, window=window))
        wh.load(LoadBatch({"vgpu_allocations": pl.DataFrame(
            [_allocation("a", 0, 10), _allocation("b", 11, 20)], schema=polars_schema(VGPU_ALLOCATIONS))}))
        now = held_hourly(wh, window, RULES)
        then = held_hourly(wh, window, replace(RULES, hole_rule=HOLE_RULE_V2))

    def minutes(frame: pl.DataFrame) -> dict[str, float]:
        held = frame.filter(pl.col("pod").is_not_null())
        return {pod: float(part["held_hours"].sum()) * 60 for (pod,), part in held.group_by("pod")}

    assert minutes(now) == pytest.approx({"a": 10 - 0, "b": 20 - 11})
    # the hole (minute 10 missed, 1 minute past the spacing) split at its midpoint: b from 10.5
    assert minutes(then)["b"] == pytest.approx(20 - 10.5)
