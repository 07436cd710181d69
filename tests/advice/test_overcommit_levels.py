"""The overcommit advice summed per level in DuckDB equals the per-minute path it replaced.

Reference: tests/advice/overcommit_reference.py, the per-minute query over the whole window and
the per-minute analysis as they were (main a31fb2b). The fleet is seeded to reach every branch:
- 6 shared cards over 30 hours across a UTC midnight (the new path reads a day at a time), in
  pools `ts-a` (timeslice, H100), `vg-b` (vGPU, A100) and one card with no pool (`(none)`), plus an
  exclusive card that must not count;
- holders change every 20 minutes (1-5 pods per card), so some levels are thinner than
  `min_minutes` and are dropped, others are not;
- owners: ReplicaSet (inference), Job (training) and a `gpuledger.io/workload-class: batch` label
  (a class without a ceiling);
- activity NULL in some minutes (a mean over the minutes with a reading), vLLM counters on most
  but not all inference pods (tokens/s on a pool only where every level has them) and a counter
  reset (a negative step counts as the new value).
Every advice must match: same pools and classes, metric, curve levels and minutes, knee,
recommended, past_knee; work, running, card-hours and saving to 1e-9 relative.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gpuledger.analytics.advice.overcommit import (
    LEVEL_SCHEMA,
    OvercommitAdvice,
    advice_from_levels,
    levels_of,
)
from gpuledger.analytics.advice.run import overcommit_advice, overcommit_pools
from gpuledger.core.config import Settings
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.core.rules import SamplingRules
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import advice as queries
from tests.advice import overcommit_reference as ref
from tests.advice.overcommit_reference import reference_advice
from tests.analytics.builders import Seg, at, gpus, load, namespaces, pods, samples, window

START = at(hours=8)  # 08:00 day 1 to 14:00 day 2: two UTC days
HOURS = 30
CARDS = (("GPU-A0", "ts-a", "timeslice", "H100-80GB"), ("GPU-A1", "ts-a", "timeslice", "H100-80GB"),
         ("GPU-B0", "vg-b", "vgpu", "A100-SXM4-40GB"), ("GPU-B1", "vg-b", "vgpu", "A100-SXM4-40GB"),
         ("GPU-N0", None, "timeslice", "H100-80GB"), ("GPU-N1", None, "timeslice", "L4"))
OWNERS = ("ReplicaSet", "Job", "batch")


def _pod(card: int, slot: int) -> tuple[str, str]:
    return "serve" if card % 3 == 0 else ("ml" if card % 3 == 1 else "etl"), f"p{card}-{slot}"


def _counter(counters: dict[str, float], pod: str, t: datetime, rate: float, rng: np.random.Generator) -> dict:
    """vLLM's generation counter at `t` + 30 s after `rate` tokens/s for a minute (reset now and then)."""
    counters[pod] = rate * 60 if rng.random() < 0.002 else counters.get(pod, 0.0) + rate * 60
    return {"ts": t + timedelta(seconds=30), "namespace": "serve", "pod": pod, "model_name": "llama",
            "prompt_tokens_total": None, "generation_tokens_total": counters[pod],
            "num_requests_waiting": None, "num_requests_running": None}


def _frames() -> dict:
    rng = np.random.default_rng(34)
    segs: list[Seg] = []
    tokens: list[dict] = []
    counters: dict[str, float] = {}
    for c, (uuid, _, _, _) in enumerate(CARDS):
        for block in range(HOURS * 3):
            lo = START + timedelta(minutes=20 * block)
            holders = int(rng.integers(1, 6)) if c < 4 else int(rng.choice([1, 2, 2, 3]))
            holders = 6 if (c, block) == (1, 7) else holders  # 20 minutes: thinner than min_minutes
            base = float(rng.uniform(0.2, 0.5))
            for m in range(20):
                t = lo + timedelta(minutes=m)
                act = None if rng.random() < 0.05 else min(1.0, base * holders ** 0.5 + float(rng.normal(0, 0.02)))
                for slot in range(holders):
                    ns, pod = _pod(c, slot)
                    segs.append(Seg(uuid, t, t + timedelta(minutes=1), ns, pod, act=act, vgpu=str(slot)))
    # the serving pods report every minute from before the window, except p3-4: card 0 is on
    # tokens/s, card 3 on activity (its minutes with p3-4 have no card figure)
    for m in range(-10, HOURS * 60):
        for pod in [f"p0-{slot}" for slot in range(6)] + [f"p3-{slot}" for slot in range(4)]:
            tokens.append(_counter(counters, pod, START + timedelta(minutes=m),
                                   float(rng.uniform(50, 150)), rng))
    segs.append(Seg("GPU-X", START, START + timedelta(hours=HOURS), "ml", "solo", act=0.9))
    kinds = {"serve": "ReplicaSet", "ml": "Job", "etl": "Job"}
    pod_rows = [{"namespace": ns, "pod": pod, "owner_kind": kinds[ns], "owner_name": f"{pod}-owner",
                 "labels": json.dumps({"gpuledger.io/workload-class": "batch"} if ns == "etl" else {})}
                for ns, pod in {_pod(c, s) for c in range(len(CARDS)) for s in range(6)}]
    pod_rows.append({"namespace": "ml", "pod": "solo", "owner_kind": "Job", "owner_name": "solo"})
    return {
        "gpus": gpus(*({"uuid": u, "pool": p, "sharing_mode": mode, "model": model, "replicas": 5, "gpu_index": i}
                       for i, (u, p, mode, model) in enumerate(CARDS)),
                     {"uuid": "GPU-X", "pool": "ts-a", "sharing_mode": "exclusive", "gpu_index": 7}),
        "namespaces": namespaces({"serve": "web", "ml": "research", "etl": "data"}),
        "pods": pods(*pod_rows),
        "gpu_samples": samples(segs),
        "token_samples": pl.DataFrame(tokens, schema=polars_schema(TABLES["token_samples"])),
    }


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load(tmp_path_factory.mktemp("overcommit") / "o.duckdb", window(HOURS + 1, START - timedelta(hours=1)),
                _frames())


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


def _same(new: list[OvercommitAdvice], old: list[OvercommitAdvice]) -> None:
    assert [(a.pool, a.workload_class, a.metric, a.knee, a.recommended, a.past_knee) for a in new] == \
        [(a.pool, a.workload_class, a.metric, a.knee, a.recommended, a.past_knee) for a in old]
    for a, b in zip(new, old, strict=True):
        assert [(c["holders"], c["minutes"]) for c in a.curve] == [(c["holders"], c["minutes"]) for c in b.curve]
        assert all(_close(c["work_per_card"], d["work_per_card"]) for c, d in zip(a.curve, b.curve, strict=True))
        assert _close(a.running, b.running) and _close(a.card_hours, b.card_hours)
        assert _close(a.monthly_saving, b.monthly_saving)


def test_the_sql_path_equals_the_per_minute_path(path: Path) -> None:
    settings = Settings.model_validate({"advice": {"overcommit_max": {"inference": 4, "training": 2}}})
    w = window(HOURS, START)
    with Warehouse.open(path, read_only=True) as wh:
        old = reference_advice(wh, w, settings)
        new = overcommit_pools(wh, w, settings)
        rows = overcommit_advice(wh, w, settings).rows
    _same(new, old)
    assert {a.pool for a in new} == {"ts-a", "vg-b", "(none)"}  # the exclusive card is not read
    assert {a.workload_class for a in new} == {"inference", "training", "batch"}
    metric = {(a.pool, a.workload_class): a.metric for a in new}
    assert (metric["ts-a", "inference"], metric["vg-b", "inference"]) == ("tokens/s", "activity")
    assert any(a.past_knee for a in new) and any(a.monthly_saving > 0 for a in new)
    (training,) = (a for a in new if (a.pool, a.workload_class) == ("ts-a", "training"))
    assert [c["holders"] for c in training.curve] == [1, 2, 3, 4, 5]  # 6 (20 minutes) dropped
    assert len(rows) == len(new)


def test_the_rule_on_levels_equals_it_on_minutes(path: Path) -> None:
    """Unrounded figures, and `min_minutes` dropping different levels: the aggregate handed to
    `advice_from_levels` gives what the per-minute samples give, level for level."""
    settings = Settings()
    w = window(HOURS, START)
    with Warehouse.open(path, read_only=True) as wh:
        minutes = queries.shared_card_minutes(wh, w.start, w.end, SamplingRules.of(settings).activity)
    per_minute = minutes.with_columns(
        pl.lit("x").alias("workload_class"), pl.col("pool").fill_null("(none)"),
        pl.when(pl.col("token_holders") == pl.col("holders")).then(pl.col("tokens_per_s")).alias("tokens_per_s"),
        pl.col("model").replace_strict({"H100-80GB": 3.0, "A100-SXM4-40GB": 2.0}, default=None,
                                       return_dtype=pl.Float64).alias("unit_price"),
    ).select("pool", "workload_class", "uuid", "ts", "holders", "activity", "tokens_per_s", "unit_price")
    levels = levels_of(per_minute)
    assert levels.schema == pl.Schema(LEVEL_SCHEMA)
    assert int(levels["minutes"].sum()) == per_minute.height  # every card-minute once
    kept = []
    for min_minutes in (1, 30, 600, 900):
        kw = {"ceilings": {"x": 3}, "knee_gain": 0.1, "min_minutes": min_minutes, "window_hours": None}
        old = ref.overcommit_advice(per_minute, **kw)  # type: ignore[arg-type]
        new = advice_from_levels(levels, **kw)  # type: ignore[arg-type]
        _same(new, old)
        kept.append(sum(len(a.curve) for a in new))
    assert kept == sorted(kept, reverse=True) and kept[0] > kept[1] > kept[3] > 0  # level 6 goes at 30
