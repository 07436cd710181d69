"""The vectorised autoscaling replay gives exactly what the per-minute Python loop gave.

The reference is the frozen old module (tests/advice/autoscaling_reference.py, bc7f130). The
series are built to stress every branch: noisy load that crosses both thresholds often (the
controller flaps, so many state changes), queue spikes, NULL gauges, minutes with 0 recorded
replicas, several Deployments in one frame (one with a NULL namespace), a capped `max_replicas`
below the time-of-day floor, and window and stabilization spans other than the defaults.
Every field of every proposal must be equal (floats with ==, not approximately), but the
batch-size hint: its rule asks for more since (a full batch with requests waiting, decision
0265), so a hint now is one the reference gave too, and the reference's is taken as ours.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.advice import autoscaling, autoscaling_replay
from tests.advice import autoscaling_reference as reference

T0 = datetime(2026, 10, 1, tzinfo=UTC)


def deployment(ns: str | None, dep: str, minutes: int, seed: int, *, nulls: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    hours = (np.arange(minutes) % 1440) / 60
    replicas = rng.integers(0, 9, minutes) if nulls else np.full(minutes, 6 + seed % 5)
    wave = 0.5 + 0.45 * np.sin(np.pi * (hours - 6) / 12)
    activity = np.clip(wave + rng.normal(0, 0.25, minutes), 0, 1)
    queue = np.where(rng.random(minutes) < 0.1, rng.exponential(30, minutes), rng.exponential(1.5, minutes))
    running = activity * 40
    tokens = running * rng.uniform(20, 60, minutes)
    frame = pl.DataFrame({
        "namespace": [ns] * minutes, "deployment": [dep] * minutes,
        "ts": [T0 + timedelta(minutes=i) for i in range(minutes)],
        "replicas": replicas.astype(np.int64), "queue": queue, "activity": activity,
        "running": running, "tokens_per_s": tokens,
    }, schema=autoscaling.SERIES_SCHEMA)
    if nulls:
        gaps = pl.Series(rng.random(minutes) < 0.05)
        frame = frame.with_columns(
            pl.when(gaps).then(None).otherwise(pl.col("queue")).alias("queue"),
            pl.when(gaps.shift(1, fill_value=False)).then(None).otherwise(pl.col("activity")).alias("activity"),
            pl.when(gaps).then(None).otherwise(pl.col("tokens_per_s")).alias("tokens_per_s"))
    return frame


SERIES = pl.concat([
    deployment("serve", "chat", 4 * 1440, 1, nulls=False),
    deployment("serve", "embed", 3 * 1440 + 17, 2, nulls=True),
    deployment(None, "orphan", 600, 3, nulls=False),
    deployment("batch", "rank", 3, 4, nulls=True),
]).sample(fraction=1.0, shuffle=True, seed=5)
POLICIES = [
    (5, 4.0, 0.8, 0.3, 60, 600, None),
    (10, 2.0, 0.7, 0.4, 0, 3600, None),
    (7, 8.0, 0.9, 0.2, 300, 120, 3),
    (5, 0.5, 0.6, 0.5, 3600, 0, 40),
]


@pytest.mark.parametrize("knobs", POLICIES, ids=[f"policy{i}" for i in range(len(POLICIES))])
def test_every_field_equals_the_minute_loop(knobs: tuple[int, float, float, float, int, int, int | None]) -> None:
    per = {("serve", "chat"): 2, ("batch", "rank"): 4}
    new = autoscaling.autoscaling_advice(SERIES, autoscaling.Policy(*knobs), gpus_per_replica=per, unit_price=2.5)
    old = reference.autoscaling_advice(SERIES, reference.Policy(*knobs), gpus_per_replica=per, unit_price=2.5)
    assert len(new) == len(old) == 4
    for n, was in zip(new, old, strict=True):
        assert n.batching is None or was.batching is not None  # the rule only narrowed (0265)
        o = replace(was, batching=n.batching)
        assert {k: v for k, v in asdict(n).items() if k != "policy"} == \
            {k: v for k, v in asdict(o).items() if k != "policy"}
        assert n.as_dict() == o.as_dict() and n.reason() == o.reason()
    presorted = SERIES.sort("namespace", "deployment", "ts")  # as `run.by_day` hands it over
    assert autoscaling.autoscaling_advice(presorted, autoscaling.Policy(*knobs), gpus_per_replica=per,
                                          unit_price=2.5, presorted=True) == new


def test_the_controller_really_moves() -> None:
    """The equality above means something only if the replay changes its count often and the
    over-target counts are not all zero."""
    load = SERIES.filter(pl.col("deployment") == "chat").sort("ts")
    group = load.with_columns(pl.col("queue").fill_null(0.0), pl.col("activity").fill_null(0.0))
    rec = [int(v) for v in group["replicas"]]
    lw = [r * float(a) for r, a in zip(rec, group["activity"], strict=True)]
    q = [float(v) for v in group["queue"]]
    hours = [int(h) for h in group["ts"].dt.hour()]
    floor = reference.minimum_by_hour(group["ts"].to_list(), lw, 0.8)
    proposed = reference.replay(lw, q, hours, floor, policy=reference.Policy(), max_replicas=max(*rec, *floor))
    assert sum(a != b for a, b in itertools.pairwise(proposed)) > 50
    (found,) = (a for a in autoscaling.autoscaling_advice(SERIES, autoscaling.Policy()) if a.deployment == "chat")
    assert 0 < found.over_target_minutes < found.minutes


@pytest.mark.parametrize("width", [1, 5, 10])
def test_window_means_bit_for_bit(width: int) -> None:
    values = np.random.default_rng(width).lognormal(0, 3, 5000)
    assert autoscaling_replay.window_means(values, width).tolist() == \
        reference._window_means(values.tolist(), width)
