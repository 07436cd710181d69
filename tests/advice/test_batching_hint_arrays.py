"""Step 6, the batch-size hint, on numpy arrays equals the Polars filters it was (af13849,
frozen below): the same text or the same None on series that get it (capped batches, waiting at
the cap), on series that miss each condition in turn (flat tokens, waiting below the cap, a busy
GPU, too few readings, one concurrency), with null readings and replicas at zero mixed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.advice.autoscaling import (
    BATCH_FULL,
    SERIES_SCHEMA,
    WAITING_AT_FULL,
    WAITING_SHARE,
    batching_hint,
)

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def polars_hint(frame: pl.DataFrame, scale_up: float) -> str | None:
    """The hint as af13849 computed it with Polars (decision 0265), frozen."""
    data = frame.filter(pl.col("running").is_not_null() & pl.col("tokens_per_s").is_not_null()
                        & (pl.col("replicas") > 0))
    if data.height < 8:
        return None
    data = data.with_columns((pl.col("running") / pl.col("replicas")).alias("_c"),
                             (pl.col("tokens_per_s") / pl.col("replicas")).alias("_t"))
    lo, hi = data["_c"].quantile(0.25, "lower"), data["_c"].quantile(0.75, "higher")
    quiet = data.filter(pl.col("_c") <= lo)
    busy = data.filter(pl.col("_c") >= hi)
    if quiet.is_empty() or busy.is_empty() or hi is None or lo is None or hi <= lo:
        return None
    t_lo, t_hi = float(quiet["_t"].mean()), float(busy["_t"].mean())  # type: ignore[arg-type]
    if not (t_lo > 0 and t_hi >= 1.3 * t_lo and float(busy["activity"].mean()) < scale_up):  # type: ignore[arg-type]
        return None
    cap = float(data["_c"].max())  # type: ignore[arg-type]
    waiting = data.filter(pl.col("queue") > 0)
    full = waiting.filter(pl.col("_c") >= BATCH_FULL * cap).height
    if waiting.height < WAITING_SHARE * data.height or full < WAITING_AT_FULL * waiting.height:
        return None
    return (f"tokens/s per replica rises {t_hi / t_lo:.1f}x from {lo:.0f} to {hi:.0f} concurrent requests "
            f"and requests waited with the batch full ({cap:.0f} running per replica) in "
            f"{waiting.height / data.height:.0%} of minutes: grow the batch size (vLLM --max-num-seqs) "
            "before adding replicas")


def minutes(seed: int, n: int = 2880, *, cap: float = 16.0, flat: bool = False, busy_gpu: bool = False,
            wait_below_cap: bool = False, nulls: bool = False, one_level: bool = False) -> pl.DataFrame:
    """A Deployment's prepared minutes (queue and activity filled, as `_one` hands them over):
    requests in flight follow a noisy daily wave, at most `cap` run per replica, the rest wait."""
    rng = np.random.default_rng(seed)
    replicas = rng.integers(1, 5, n)
    wave = 0.5 + 0.5 * np.sin(np.arange(n) * 2 * np.pi / 1440) + rng.uniform(0, 0.3, n)
    in_flight = (np.full(n, 4.0) if one_level else 1 + 22 * wave) * replicas
    running = np.minimum(in_flight, cap * replicas)
    queue = in_flight - running
    if wait_below_cap:
        queue = np.where(rng.random(n) < 0.3, rng.uniform(1, 5, n), 0.0)
    tokens = np.full(n, 250.0) * replicas if flat else running * rng.uniform(55, 65, n)
    activity = np.clip(running / (cap * replicas) * (1.2 if busy_gpu else 0.6), 0, 1)
    frame = pl.DataFrame({
        "namespace": "serve", "deployment": "chat", "ts": [T0 + timedelta(minutes=i) for i in range(n)],
        "replicas": replicas.astype(np.int64), "queue": queue, "activity": activity,
        "running": running, "tokens_per_s": tokens,
    }, schema=SERIES_SCHEMA)
    if nulls:
        gaps = pl.Series(rng.random(n) < 0.1)
        frame = frame.with_columns(
            pl.when(gaps).then(None).otherwise(pl.col("running")).alias("running"),
            pl.when(gaps.shift(3, fill_value=False)).then(None).otherwise(pl.col("tokens_per_s")).alias("tokens_per_s"),
            pl.when(pl.Series(rng.random(n) < 0.05)).then(0).otherwise(pl.col("replicas")).alias("replicas"))
    return frame


CASES: dict[str, dict[str, Any]] = {
    "capped": dict(), "capped, nulls": dict(nulls=True), "capped high": dict(cap=30.0),
    "flat tokens": dict(flat=True), "busy GPU": dict(busy_gpu=True),
    "waiting below the cap": dict(wait_below_cap=True), "one concurrency": dict(one_level=True),
    "seven minutes": dict(n=7), "short, nulls": dict(n=40, nulls=True),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_arrays_give_the_polars_hint(case: str, seed: int) -> None:
    frame = minutes(seed, **CASES[case])
    for scale_up in (0.5, 0.8):
        assert batching_hint(frame, scale_up) == polars_hint(frame, scale_up)


def test_the_cases_reach_both_answers() -> None:
    """The equality above means something only if some cases get the hint and others do not."""
    got = {case: batching_hint(minutes(1, **kw), 0.8) for case, kw in CASES.items()}
    assert got["capped"] is not None and got["capped, nulls"] is not None
    assert got["flat tokens"] is None and got["busy GPU"] is None and got["waiting below the cap"] is None
    assert got["one concurrency"] is None and got["seven minutes"] is None
