"""Every user of the activity rule follows it, under the source the rules name (issue 28,
docs/decisions/0157): the advice queries (node activity per hour, shared cards per minute,
serving Deployments per minute), the workload statistics behind recommendations and the catalog,
and the fragmentation kind's past load.

The rule (`core.activity`): GR_ENGINE_ACTIVE, else GPU_UTIL / 100; with `idle.activity:
gpu_util`, GPU_UTIL / 100 only. A value that is missing, NaN or negative is no reading, never 0.
Expected values are worked out below by hand from the samples, never read from the code:

node `n1`, cards `C1`, `C2`, one sample a minute (60 per card-hour):

| hour | C1 (GR, UTIL)  | C2 (GR, UTIL)   | rule (default)        | rule (gpu_util)       |
|------|----------------|-----------------|-----------------------|-----------------------|
| 0    | 0.5, —         | —, 30 %         | (0.5 + 0.3) / 2 = 0.4 | C2 only: 0.3          |
| 1    | —, —           | —, —            | no reading: NULL      | NULL                  |
| 2    | NaN, 20 %      | 0.1, 90 %       | (0.2 + 0.1) / 2 = 0.15| (0.2 + 0.9) / 2 = 0.55|

The old node query averaged `coalesce(gr_engine_active, 0)`: 0.25, 0 and NaN.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.advice.fragmentation import rebuilds
from gpuledger.core.config_advice import MaintenanceWindow
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.advice import node_activity_hourly, serving_minutes, shared_card_minutes
from tests.analytics.builders import T0, Seg, at, gpus, load, namespaces, pods, samples, window

NAN = float("nan")
HOURS = 3


def _node_frames() -> dict[str, pl.DataFrame]:
    segs = [
        Seg("C1", at(0), at(1), act=0.5, util=None, node="n1"),
        Seg("C2", at(0), at(1), act=None, util=30.0, node="n1"),
        Seg("C1", at(1), at(2), act=None, util=None, node="n1"),
        Seg("C2", at(1), at(2), act=None, util=None, node="n1"),
        Seg("C1", at(2), at(3), act=NAN, util=20.0, node="n1"),
        Seg("C2", at(2), at(3), act=0.1, util=90.0, node="n1"),
    ]
    return {"gpus": gpus({"uuid": "C1", "node": "n1"}, {"uuid": "C2", "node": "n1", "gpu_index": 1}),
            "gpu_samples": samples(segs)}


@pytest.fixture(scope="module")
def node_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load(tmp_path_factory.mktemp("activity") / "node.duckdb", window(HOURS), _node_frames())


@pytest.mark.parametrize(("source", "expected"), [
    ("gr_engine_active", [0.4, None, 0.15]),
    ("gpu_util", [0.3, None, 0.55]),
])
def test_node_activity_is_the_rule_and_a_missing_reading_is_not_zero(node_wh: Path, source: str,
                                                                     expected: list[float | None]) -> None:
    with Warehouse.open(node_wh, read_only=True) as wh:
        frame = node_activity_hourly(wh, T0, at(HOURS), source)  # type: ignore[arg-type]
    assert frame["ts"].to_list() == [T0 + timedelta(hours=h) for h in range(HOURS)]
    assert frame["node"].to_list() == ["n1"] * HOURS
    got = frame["activity"].to_list()
    assert got[1] is None  # no reading at all: unknown, not idle
    for value, want in zip(got, expected, strict=True):
        if want is not None:
            assert value == pytest.approx(want, abs=1e-12)


def test_the_past_load_leaves_hours_without_a_reading_out() -> None:
    """Rebuild evidence: the node's load inside its window and overall, over hours with readings
    only. Hours 0-2 on a Saturday 00:00-03:00 window: 0.4 and 0.15 inside (mean 0.275); hour 26
    (Sunday) 0.9 outside; overall (0.4 + 0.15 + 0.9) / 3. Counting the NULL hour as 0 (the old
    query's 0) would give 0.55 / 3 inside and 1.45 / 4 overall."""
    saturday = T0 - timedelta(days=T0.weekday() - 5) if T0.weekday() >= 5 else T0 + timedelta(days=5 - T0.weekday())
    hours = [saturday, saturday + timedelta(hours=1), saturday + timedelta(hours=2), saturday + timedelta(hours=26)]
    activity = pl.DataFrame({"ts": hours, "node": ["n1"] * 4, "activity": [0.4, None, 0.15, 0.9]})
    rates = pl.DataFrame({"ts": [saturday], "node": ["n1"], "pool": ["p-mig"], "rate": [0.5], "free_slices": [4],
                          "slices": [7], "unusable_slices": [2]})
    windows = (MaintenanceWindow(pool="p-mig", weekly=("sat 00:00-03:00",), timezone="UTC"),)
    (found,) = rebuilds(rates, threshold=0.3, min_free=0.25, now=saturday + timedelta(days=2), windows=windows,
                        activity=activity)
    assert found.window_load == pytest.approx((0.4 + 0.15) / 2, abs=1e-12)
    assert found.overall_load == pytest.approx((0.4 + 0.15 + 0.9) / 3, abs=1e-12)
    every_hour_unknown = activity.with_columns(pl.lit(None, pl.Float64).alias("activity"))
    (unknown,) = rebuilds(rates, threshold=0.3, min_free=0.25, now=saturday + timedelta(days=2),
                          windows=windows, activity=every_hour_unknown)
    assert unknown.window_load is None and unknown.overall_load is None


# Shared cards and serving Deployments, per minute -------------------------------------------
# A time-sliced card `TS` held by two pods of Deployment `web` (ReplicaSet `web-5d8f7c9b4d`), and a
# whole card `W` held by a third replica, for 40 minutes: on TS, GR_ENGINE_ACTIVE is missing and
# GPU_UTIL is 40 %, on W GR_ENGINE_ACTIVE is 0.7 and GPU_UTIL 10 %.
MINUTES = 40


def _shared_frames() -> dict[str, pl.DataFrame]:
    end = at(minutes=MINUTES)
    pod = "web-5d8f7c9b4d-{}"
    segs = [Seg("TS", T0, end, "ns", pod.format("a"), act=None, util=40.0, node="n2", vgpu="0"),
            Seg("TS", T0, end, "ns", pod.format("b"), act=None, util=40.0, node="n2", vgpu="1"),
            Seg("W", T0, end, "ns", pod.format("c"), act=0.7, util=10.0, node="n2")]
    return {
        "gpus": gpus({"uuid": "TS", "node": "n2", "sharing_mode": "timeslice", "replicas": 4},
                     {"uuid": "W", "node": "n2", "gpu_index": 1}),
        "namespaces": namespaces({"ns": "web"}),
        "pods": pods(*({"namespace": "ns", "pod": pod.format(x), "node": "n2", "owner_kind": "ReplicaSet",
                        "owner_name": "web-5d8f7c9b4d", "labels": '{"pod-template-hash": "5d8f7c9b4d"}'}
                       for x in "abc")),
        "gpu_samples": samples(segs),
    }


@pytest.fixture(scope="module")
def shared_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load(tmp_path_factory.mktemp("activity") / "shared.duckdb", window(1), _shared_frames())


@pytest.mark.parametrize(("source", "expected"), [("gr_engine_active", 0.4), ("gpu_util", 0.4)])
def test_a_shared_card_without_gr_engine_active_reads_gpu_util(shared_wh: Path, source: str,
                                                               expected: float) -> None:
    with Warehouse.open(shared_wh, read_only=True) as wh:
        frame = shared_card_minutes(wh, T0, at(minutes=3), source)  # type: ignore[arg-type]
    assert frame["uuid"].to_list() == ["TS"] * 3 and frame["holders"].to_list() == [2] * 3
    assert frame["activity"].to_list() == pytest.approx([expected] * 3, abs=1e-12)  # the old query: NULL


@pytest.mark.parametrize(("source", "expected"), [
    ("gr_engine_active", (0.4 + 0.4 + 0.7) / 3),  # per replica: TS's two pods read GPU_UTIL, W's GR
    ("gpu_util", (0.4 + 0.4 + 0.1) / 3),
])
def test_serving_minutes_follow_the_rules_source(shared_wh: Path, source: str, expected: float) -> None:
    with Warehouse.open(shared_wh, read_only=True) as wh:
        frame = serving_minutes(wh, T0, at(minutes=3), source)  # type: ignore[arg-type]
    assert frame["deployment"].to_list() == ["web"] * 3 and frame["replicas"].to_list() == [3] * 3
    assert frame["activity"].to_list() == pytest.approx([expected] * 3, abs=1e-12)


def test_the_overcommit_kind_reads_the_rule(shared_wh: Path) -> None:
    """The overcommit kind's evidence on TS: 40 minutes at 2 holders, work per card the mean
    activity, 0.4 (GPU_UTIL 40 %) under either source. The old query read GR_ENGINE_ACTIVE alone:
    no activity at all on this card."""
    from gpuledger.analytics.advice.run import overcommit_advice
    from gpuledger.core.config import Settings

    with Warehouse.open(shared_wh, read_only=True) as wh:
        for source in ("gr_engine_active", "gpu_util"):
            found = overcommit_advice(wh, window(1), Settings.model_validate({"idle": {"activity": source}}))
            (pool,) = found.document["pools"]
            assert pool["metric"] == "activity"
            (point,) = pool["curve"]
            assert (point["holders"], point["minutes"]) == (2.0, float(MINUTES))
            assert point["work_per_card"] == pytest.approx(0.4, abs=1e-12)
