"""The autoscaling proposals as read before the series was kept per Deployment (main at
f62d17e: `analytics.advice.run.autoscaling_proposals` and `autoscaling.autoscaling_advice`):
the month's per-minute serving frame read a day at a time, concatenated, sorted and prepared
whole. Frozen as the reference `test_autoscaling_streamed` compares the new path with; each
Deployment's replay is `autoscaling._one`, which finds its hourly 5th percentiles itself since
they left the month's group-by (the minute loop, tests/advice/autoscaling_reference.py, checks
them independently)."""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.advice import autoscaling
from gpuledger.analytics.advice.autoscaling import AutoscalingAdvice, Policy, _one
from gpuledger.analytics.advice.run import _price, by_day, policy_of
from gpuledger.core.config import Settings
from gpuledger.core.mig import canonical_model
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import advice as queries


def reference_proposals(wh: Warehouse, window: Window, settings: Settings) -> list[AutoscalingAdvice]:
    keep = (*autoscaling.SERIES_SCHEMA, "gpus_per_replica", "model")
    activity = SamplingRules.of(settings).activity
    series = by_day(lambda w, lo, hi: queries.serving_minutes(w, lo, hi, activity), wh, window,
                    ("namespace", "deployment", "ts"), keep)
    if series.is_empty():
        return []
    per = {(str(n), str(d)): int(g or 1) for n, d, g in
           series.group_by("namespace", "deployment").agg(pl.col("gpus_per_replica").max()).iter_rows()}
    models = {canonical_model(str(m)) for m in series["model"].drop_nulls().unique()}
    prices = [_price(settings, m, window.start) for m in sorted(models)] or [0.0]
    return autoscaling_advice(series.select(list(autoscaling.SERIES_SCHEMA)), policy_of(settings),
                              gpus_per_replica=per, unit_price=max(prices), presorted=True)


def autoscaling_advice(
    series: pl.DataFrame, policy: Policy, *, gpus_per_replica: dict[tuple[str, str], int] | None = None,
    unit_price: float = 0.0, presorted: bool = False,
) -> list[AutoscalingAdvice]:
    frame = (series if presorted else series.sort("namespace", "deployment", "ts")).with_columns(
        pl.col("queue").fill_null(0.0), pl.col("activity").fill_null(0.0),
    ).with_columns((pl.col("replicas") * pl.col("activity")).alias("_load"),
                   pl.col("ts").dt.hour().alias("_h"))
    out, offset = [], 0
    for ns, dep, length in frame.group_by("namespace", "deployment", maintain_order=True).len().iter_rows():
        key = (str(ns), str(dep))
        per = (gpus_per_replica or {}).get(key, 1)
        out.append(_one(key, frame.slice(offset, length), policy, per=per, price=unit_price))
        offset += length
    return out
