"""Overcommit advice for time-sliced and vGPU pools: the knee of replicas per card.

Sharing a card by time-slicing pays until context switching eats the gain: teams report the
knee near 1:3-1:4 for inference and at most 1:2 for training. This module measures it per
pool and workload class instead of assuming it.

1. Evidence: per card-minute, how many pods hold the card (`holders`), the card's activity
   (DCGM reports card-level figures on shared cards) and, where vLLM metrics exist, the
   tokens/s all holders delivered. Work = tokens/s when every measured level has it, else
   activity (then per-holder work is activity / holders).
2. Curve: per (pool, class, holders = r) the mean work per card T(r) and the minutes seen.
   Levels seen for fewer than `min_minutes` minutes are too thin to judge and are dropped.
3. Knee: walk the levels upward; the knee is the last level whose step from the previous one
   added at least `knee_gain` x one holder's work at the lowest level, per replica added.
   Past the knee another replica adds (almost) nothing, or takes work away.
4. Recommended ratio = min(knee, the class ceiling from settings: inference 4, training 2).
   The pool runs at its mean holders per card-minute; above the recommended ratio
   it is flagged `past_knee`. Below it, packing up to the ratio frees cards: the saving is
   card-hours x (1 - running / recommended) x price, per month (730 h).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

HOURS_PER_MONTH = 730.0
SAMPLE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "pool": pl.String, "workload_class": pl.String, "uuid": pl.String, "ts": pl.Datetime("us", "UTC"),
    "holders": pl.Int64, "activity": pl.Float64, "tokens_per_s": pl.Float64, "unit_price": pl.Float64,
}
"""One row per shared card per minute (see step 1)."""
LEVEL_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "pool": pl.String, "workload_class": pl.String, "holders": pl.Int64, "minutes": pl.Int64,
    "activity_sum": pl.Float64, "activity_n": pl.Int64, "tokens_sum": pl.Float64, "tokens_n": pl.Int64,
    "price_sum": pl.Float64, "first_ts": pl.Datetime("us", "UTC"), "last_ts": pl.Datetime("us", "UTC"),
}
"""The same evidence summed per level: card-minutes at `holders`, sums and counts of the
non-NULL activity and tokens/s, the sum of the minutes' unit prices (NULL as 0), first and last
minute. Every figure of steps 2-4 is a ratio of these sums, so the month is read as a few rows
per pool, not one per card-minute."""


@dataclass(frozen=True)
class OvercommitAdvice:
    pool: str
    workload_class: str
    curve: tuple[dict[str, float], ...]
    """Per measured level: `holders`, `minutes`, `work_per_card`, `work_per_holder`."""
    metric: str
    knee: int
    recommended: int
    running: float
    past_knee: bool
    card_hours: float
    monthly_saving: float

    def reason(self) -> str:
        steps = ", ".join(f"{int(c['holders'])}:{c['work_per_card']:.3g}" for c in self.curve)
        verdict = (f"running {self.running:.1f} per card is past the knee" if self.past_knee
                   else f"running {self.running:.1f} per card")
        return (f"{self.metric} per card by replicas {{{steps}}}; knee at {self.knee}, "
                f"recommend 1:{self.recommended}; {verdict}")

    def as_dict(self) -> dict[str, object]:
        return {"pool": self.pool, "workload_class": self.workload_class, "metric": self.metric,
                "curve": list(self.curve), "knee": self.knee, "recommended": self.recommended,
                "running": round(self.running, 3), "past_knee": self.past_knee,
                "card_hours": round(self.card_hours, 3), "monthly_saving": round(self.monthly_saving, 2)}


def knee_of(levels: list[int], work: list[float], knee_gain: float) -> int:
    """Step 3 on one curve (levels ascending, work per card at each)."""
    if not levels:
        return 1
    unit = work[0] / levels[0] if levels[0] else 0.0
    knee = levels[0]
    for i in range(1, len(levels)):
        added = levels[i] - levels[i - 1]
        if work[i] - work[i - 1] < knee_gain * unit * added:
            break
        knee = levels[i]
    return knee


def overcommit_advice(
    samples: pl.DataFrame, *, ceilings: dict[str, int], knee_gain: float = 0.1,
    min_minutes: int = 30, window_hours: float | None = None,
) -> list[OvercommitAdvice]:
    """Steps 1-4 per (pool, workload class) in `samples` (SAMPLE_SCHEMA), sorted by pool, class:
    the per-minute samples summed to levels (`levels_of`), then `advice_from_levels`."""
    return advice_from_levels(levels_of(samples), ceilings=ceilings, knee_gain=knee_gain,
                              min_minutes=min_minutes, window_hours=window_hours)


def levels_of(samples: pl.DataFrame) -> pl.DataFrame:
    """Per-minute samples (SAMPLE_SCHEMA) summed per (pool, class, holders) into LEVEL_SCHEMA."""
    return samples.group_by("pool", "workload_class", "holders").agg(
        pl.len().cast(pl.Int64).alias("minutes"), pl.col("activity").sum().alias("activity_sum"),
        pl.col("activity").count().cast(pl.Int64).alias("activity_n"),
        pl.col("tokens_per_s").sum().alias("tokens_sum"),
        pl.col("tokens_per_s").count().cast(pl.Int64).alias("tokens_n"),
        pl.col("unit_price").fill_null(0.0).sum().alias("price_sum"),
        pl.col("ts").min().alias("first_ts"), pl.col("ts").max().alias("last_ts"),
    ).select(list(LEVEL_SCHEMA))


def advice_from_levels(
    levels: pl.DataFrame, *, ceilings: dict[str, int], knee_gain: float = 0.1,
    min_minutes: int = 30, window_hours: float | None = None,
) -> list[OvercommitAdvice]:
    """Steps 1-4 per (pool, workload class) on sums and counts (LEVEL_SCHEMA; several rows per
    level are summed first), sorted by pool, class."""
    levels = levels.filter(pl.col("holders") > 0)
    if levels.is_empty():
        return []
    levels = levels.group_by("pool", "workload_class", "holders").agg(
        pl.col("minutes", "activity_n", "tokens_n").sum(),
        pl.col("activity_sum", "tokens_sum", "price_sum").fill_null(0.0).sum(),
        pl.col("first_ts").min(), pl.col("last_ts").max())
    first, last = levels["first_ts"].min(), levels["last_ts"].max()
    span_h = 0.0
    if isinstance(first, datetime) and isinstance(last, datetime):
        span_h = (last - first).total_seconds() / 3600
    hours = window_hours or span_h + 1 / 60
    out = []
    for (pool, klass), group in levels.sort("pool", "workload_class", "holders").group_by(
            "pool", "workload_class", maintain_order=True):
        advice = _one((str(pool), str(klass)), group, ceilings, knee_gain=knee_gain,
                      min_minutes=min_minutes, hours=hours)
        if advice is not None:
            out.append(advice)
    return out


def _mean(total: str, n: str) -> pl.Expr:
    """A mean from a sum and a count of the non-NULL values: NULL when none was seen."""
    return pl.when(pl.col(n) > 0).then(pl.col(total) / pl.col(n))


def _curve(group: pl.DataFrame, min_minutes: int) -> tuple[pl.DataFrame, str]:
    """Step 2: work per card by holders, on tokens/s when every level measured them."""
    curve = group.filter(pl.col("minutes") >= min_minutes).sort("holders").with_columns(
        _mean("activity_sum", "activity_n").alias("activity"),
        _mean("tokens_sum", "tokens_n").alias("tokens"),
        (pl.col("minutes") - pl.col("tokens_n")).alias("_nt"))
    use_tokens = curve.height > 0 and int(curve["_nt"].sum()) == 0
    metric = "tokens/s" if use_tokens else "activity"
    return curve.with_columns(pl.col("tokens" if use_tokens else "activity").alias("work")), metric


def _one(
    key: tuple[str, str], group: pl.DataFrame, ceilings: dict[str, int], *, knee_gain: float,
    min_minutes: int, hours: float,
) -> OvercommitAdvice | None:
    """Steps 2-4 on one (pool, class)'s levels (one row per holders level)."""
    pool, klass = key
    curve, metric = _curve(group, min_minutes)
    if curve.is_empty():
        return None
    levels = [int(v) for v in curve["holders"]]
    work = [float(v) for v in curve["work"]]
    knee = knee_of(levels, work, knee_gain)
    ceiling = ceilings.get(klass, min(ceilings.values(), default=knee))
    recommended = max(1, min(knee, ceiling))
    minutes = int(group["minutes"].sum())
    running = float((group["holders"] * group["minutes"]).sum()) / minutes
    card_hours = minutes / 60.0
    price = float(group["price_sum"].sum()) / minutes
    past = running > recommended + 1e-9
    saving = 0.0 if past else card_hours * (1 - running / recommended) * price * HOURS_PER_MONTH / hours
    points = tuple({"holders": float(lv), "minutes": float(m), "work_per_card": w, "work_per_holder": w / lv}
                   for lv, m, w in zip(levels, curve["minutes"], work, strict=True))
    return OvercommitAdvice(pool, klass, points, metric, knee, recommended, running, past,
                            card_hours, max(saving, 0.0))


def classify(owner_kind: str | None, labels: dict[str, str] | None) -> str:
    """A workload's class: the `gpuledger.io/workload-class` label, else inference for
    long-running owners (ReplicaSet, Deployment, StatefulSet), else training."""
    if labels and labels.get("gpuledger.io/workload-class"):
        return str(labels["gpuledger.io/workload-class"])
    return "inference" if owner_kind in ("ReplicaSet", "Deployment", "StatefulSet") else "training"
