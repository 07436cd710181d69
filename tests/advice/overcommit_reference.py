"""The per-minute overcommit path as it was before the advice summed levels in DuckDB (main at
a31fb2b: `analytics.advice.run.overcommit_advice` and `analytics.advice.overcommit`), frozen
as the reference `test_overcommit_levels` compares the SQL path with."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from gpuledger.analytics.advice.overcommit import SAMPLE_SCHEMA, OvercommitAdvice, classify, knee_of
from gpuledger.analytics.advice.run import _price
from gpuledger.core.config import Settings
from gpuledger.core.mig import canonical_model
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import advice as queries

HOURS_PER_MONTH = 730.0


def reference_advice(wh: Warehouse, window: Window, settings: Settings) -> list[OvercommitAdvice]:
    """The old run.py body, reading the per-minute query over the whole window at once."""
    minutes = queries.shared_card_minutes(wh, window.start, window.end, SamplingRules.of(settings).activity)
    if minutes.is_empty():
        return []
    prices = {m: _price(settings, canonical_model(m), window.start) for m in minutes["model"].unique()}
    owners = minutes.select("owner_kind", "class_label").unique()
    owners = owners.with_columns(pl.Series("workload_class", [
        classify(k, {"gpuledger.io/workload-class": lbl} if lbl else None)
        for k, lbl in owners.iter_rows()], dtype=pl.String))
    samples = minutes.join(owners, on=["owner_kind", "class_label"], how="left", nulls_equal=True,
                           maintain_order="left").with_columns(
        pl.col("model").replace_strict(prices, default=0.0, return_dtype=pl.Float64).alias("unit_price"),
        pl.when(pl.col("token_holders") == pl.col("holders")).then(pl.col("tokens_per_s"))
        .alias("tokens_per_s"),
        pl.col("pool").fill_null("(none)"),
    ).select(list(SAMPLE_SCHEMA))
    a = settings.advice
    return overcommit_advice(samples, ceilings=a.overcommit_max, knee_gain=a.overcommit_knee_gain,
                             window_hours=window.hours)


def overcommit_advice(
    samples: pl.DataFrame, *, ceilings: dict[str, int], knee_gain: float = 0.1,
    min_minutes: int = 30, window_hours: float | None = None,
) -> list[OvercommitAdvice]:
    """Steps 1-4 per (pool, workload class) in `samples` (SAMPLE_SCHEMA), sorted by pool, class."""
    samples = samples.filter(pl.col("holders") > 0)
    if samples.is_empty():
        return []
    first, last = samples["ts"].min(), samples["ts"].max()
    span_h = 0.0
    if isinstance(first, datetime) and isinstance(last, datetime):
        span_h = (last - first).total_seconds() / 3600
    hours = window_hours or span_h + 1 / 60
    out = []
    for (pool, klass), group in samples.sort("pool", "workload_class").group_by(
            "pool", "workload_class", maintain_order=True):
        advice = _one((str(pool), str(klass)), group, ceilings, knee_gain=knee_gain,
                      min_minutes=min_minutes, hours=hours)
        if advice is not None:
            out.append(advice)
    return out


def _curve(group: pl.DataFrame, min_minutes: int) -> tuple[pl.DataFrame, str]:
    """Step 2: work per card by holders, on tokens/s when every level measured them."""
    curve = group.group_by("holders").agg(
        pl.len().alias("minutes"), pl.col("activity").mean().alias("activity"),
        pl.col("tokens_per_s").mean().alias("tokens"), pl.col("tokens_per_s").null_count().alias("_nt"),
    ).filter(pl.col("minutes") >= min_minutes).sort("holders")
    use_tokens = curve.height > 0 and int(curve["_nt"].sum()) == 0
    metric = "tokens/s" if use_tokens else "activity"
    return curve.with_columns(pl.col("tokens" if use_tokens else "activity").alias("work")), metric


def _one(
    key: tuple[str, str], group: pl.DataFrame, ceilings: dict[str, int], *, knee_gain: float,
    min_minutes: int, hours: float,
) -> OvercommitAdvice | None:
    pool, klass = key
    curve, metric = _curve(group, min_minutes)
    if curve.is_empty():
        return None
    levels = [int(v) for v in curve["holders"]]
    work = [float(v) for v in curve["work"]]
    knee = knee_of(levels, work, knee_gain)
    ceiling = ceilings.get(klass, min(ceilings.values(), default=knee))
    recommended = max(1, min(knee, ceiling))
    running = float(group["holders"].mean())  # type: ignore[arg-type]
    minutes = group.height
    card_hours = minutes / 60.0
    price = float(group["unit_price"].fill_null(0.0).mean() or 0.0)  # type: ignore[arg-type]
    past = running > recommended + 1e-9
    saving = 0.0 if past else card_hours * (1 - running / recommended) * price * HOURS_PER_MONTH / hours
    points = tuple({"holders": float(lv), "minutes": float(m), "work_per_card": w, "work_per_holder": w / lv}
                   for lv, m, w in zip(levels, curve["minutes"], work, strict=True))
    return OvercommitAdvice(pool, klass, points, metric, knee, recommended, running, past,
                            card_hours, max(saving, 0.0))

