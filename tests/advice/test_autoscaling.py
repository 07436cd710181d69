"""Inference autoscaling advice: a diurnal service whose replay must save GPU-hours.

Seeded week, one row per minute: load L(t) = 2 + 6 * max(0, sin(pi (h - 6) / 12)) busy
replica-equivalents (night 2, noon 8) with 2% noise, served by a fixed 12 replicas; the queue per
replica is 2u^2/(1-u) at utilisation u = L / 12.

Cases:
- the time-of-day minimum by hand: ceil(L_min(hour) / 0.8) (3 at night, 10 at noon);
- the replay saves at least a third of the recorded GPU-hours (the recorded fleet is sized for
  the peak all day), never goes below the unsaturated bound sum(ceil(L / 1)) and stays over the
  queue target in at most 2% of minutes;
- the batching hint: where the batch is capped (vLLM's `--max-num-seqs`: at most `CAP` running
  per replica, the rest waiting) and tokens/s per replica rise with concurrency; not where
  requests wait at every concurrency (the load outgrew the replicas, not the batch), nor where
  tokens/s stay flat;
- the HPA manifest carries the thresholds, windows and replica bounds.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.advice.autoscaling import (
    SERIES_SCHEMA,
    AutoscalingAdvice,
    Policy,
    autoscaling_advice,
)
from gpuledger.analytics.advice.autoscaling_manifest import hour_ranges, render_hpa, render_keda

T0 = datetime(2026, 11, 2, tzinfo=UTC)
MINUTES = 7 * 1440
POLICY = Policy(window_minutes=5, queue_target=4.0, scale_up=0.8, scale_down=0.3,
                up_stabilization_s=60, down_stabilization_s=600)


def diurnal_load() -> np.ndarray:
    rng = np.random.default_rng(19)
    hours = (np.arange(MINUTES) % 1440) / 60
    base = 2 + 6 * np.maximum(0.0, np.sin(math.pi * (hours - 6) / 12))
    return base * (1 + rng.uniform(-0.02, 0.02, MINUTES))


def series(batching: bool = True) -> pl.DataFrame:
    load = diurnal_load()
    u = load / 12
    running = load * 8
    per_replica = running / 12
    tokens = 12 * (60 * per_replica ** 1.0 if batching else np.full(MINUTES, 300.0))
    rows = [("serve", "chat", T0 + timedelta(minutes=i), 12, float(12 * 2 * u[i] ** 2 / (1 - u[i])),
             float(u[i]), float(running[i]), float(tokens[i])) for i in range(MINUTES)]
    return pl.DataFrame(rows, schema=SERIES_SCHEMA, orient="row")


@pytest.fixture(scope="module")
def advice() -> AutoscalingAdvice:
    (a,) = autoscaling_advice(series(), POLICY, unit_price=3.0)
    return a


def test_time_of_day_minimum_by_hand(advice: AutoscalingAdvice) -> None:
    load = diurnal_load().reshape(7, 24, 60)
    for hour in (0, 3, 12, 18):
        low = np.sort(load[:, hour, :].ravel())
        p5 = low[math.floor(0.05 * (low.size - 1))]
        assert advice.minimum_by_hour[hour] == max(1, math.ceil(p5 / 0.8))
    assert advice.minimum_by_hour[3] == 3 and advice.minimum_by_hour[12] == 10


def test_replay_saves_gpu_hours_within_the_queue_target(advice: AutoscalingAdvice) -> None:
    recorded = 12 * MINUTES / 60
    assert advice.gpu_hours_recorded == pytest.approx(recorded)
    assert advice.gpu_hours_saved >= recorded / 3
    unsaturated = float(np.ceil(diurnal_load() - 1e-9).sum()) / 60
    assert advice.gpu_hours_proposed >= unsaturated
    assert advice.over_target_share <= 0.02
    assert advice.over_target_minutes_recorded == 0
    month = 730 / (MINUTES / 60)
    assert advice.monthly_saving == pytest.approx(advice.gpu_hours_saved * 3.0 * month)


CAP = 10


def capped_series(replicas: int = 12, per_load: float = 2.0, tokens_per_request: float = 60.0,
                  flat: bool = False) -> pl.DataFrame:
    """`replicas` replicas, `per_load` x L requests in flight per replica, at most `CAP`
    running (vLLM's batch), the rest waiting; tokens/s per replica follow the running requests
    (or stay flat); activity L / 12 (under 0.7, the GPU has headroom)."""
    load = diurnal_load()
    in_flight = per_load * load
    running = np.minimum(in_flight, CAP)
    tokens = np.full(MINUTES, 300.0) if flat else tokens_per_request * running
    rows = [("serve", "chat", T0 + timedelta(minutes=i), replicas, float(replicas * (in_flight[i] - running[i])),
             float(load[i] / 12), float(replicas * running[i]), float(replicas * tokens[i])) for i in range(MINUTES)]
    return pl.DataFrame(rows, schema=SERIES_SCHEMA, orient="row")


def test_batching_hint_only_where_the_batch_is_the_limit(advice: AutoscalingAdvice) -> None:
    (capped,) = autoscaling_advice(capped_series(), POLICY)
    assert capped.batching is not None and "--max-num-seqs" in capped.batching
    assert f"batch full ({CAP} running per replica)" in capped.batching
    waited = float(np.mean(2.0 * diurnal_load() > CAP))  # the minutes requests waited, by hand
    assert f"in {waited:.0%} of minutes" in capped.batching
    # requests wait at every concurrency (a queue that grows with the load): the replicas, not the batch
    assert advice.batching is None
    (flat,) = autoscaling_advice(capped_series(flat=True), POLICY)
    assert flat.batching is None
    (never_full,) = autoscaling_advice(capped_series(per_load=1.0), POLICY)  # 2-8 in flight: no wait
    assert never_full.batching is None


def test_hpa_manifest_shape(advice: AutoscalingAdvice) -> None:
    hpa = render_hpa(advice)
    spec = hpa["spec"]
    assert spec["minReplicas"] == min(advice.minimum_by_hour) and spec["maxReplicas"] == 12
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert spec["metrics"][0]["external"]["target"]["averageValue"] == "4"
    assert spec["metrics"][1]["pods"]["target"]["averageValue"] == "800m"
    keda = render_keda(advice)
    crons = [t for t in keda["spec"]["triggers"] if t["type"] == "cron"]
    assert len(crons) == len(hour_ranges(advice.minimum_by_hour)) > 0


def test_hour_ranges_merge_contiguous_hours() -> None:
    mins = (1,) * 8 + (3,) * 4 + (5,) * 2 + (3,) * 2 + (1,) * 8
    assert hour_ranges(mins) == [(8, 12, 3), (12, 14, 5), (14, 16, 3)]


def test_a_batch_size_hint_alone_is_listed_not_priced(advice: AutoscalingAdvice) -> None:
    """One replica the load never fills (activity u < 0.7, at most 2.8 requests waiting): the
    replay frees nothing, but its batch is full while requests wait. Its row is the batch-size hint with an unknown
    saving, listed "not priced" under any floor, not counted "already right-sized" (it was
    0.0, and every Deployment of the 1,000-GPU bench month was hidden so); a row that saves
    keeps its HPA and its price."""
    from gpuledger.analytics.advice.actionable import split, unpriced_lines
    from gpuledger.analytics.advice.run import _autoscaling_row

    (hint,) = autoscaling_advice(capped_series(replicas=1, per_load=1.6), POLICY, unit_price=3.0)
    assert hint.gpu_hours_saved == 0 and hint.batching is not None
    row = _autoscaling_row(hint)
    assert (row["recommended"], row["monthly_saving"]) == ("grow the batch size", None)
    shown = split([row], floor=10.0)
    assert shown.rows == [row] and not shown.quiet
    (line,) = unpriced_lines(shown.rows)
    assert line.startswith("1 batch-size hint listed not priced")
    priced = _autoscaling_row(advice)
    assert priced["recommended"] == f"HPA {advice.min_replicas}-12"
    assert priced["monthly_saving"] == pytest.approx(advice.monthly_saving) and advice.monthly_saving > 10
