"""Inference token cost: what a million prompt or generated tokens cost per model service.

1. Token counts are increases of vLLM's cumulative counters per serving pod and model, summed
   per UTC day. A counter that drops has been reset (the pod restarted): the new value is the
   increase since the reset, as Prometheus' `increase()` treats it. A series that starts inside
   the window (a new pod) counts its first value; one that started before the window is
   measured from the last sample before the window.
2. The GPU cost of each serving pod per day comes from the bill (its card-hours at the bill's
   prices, discounts included), so token cost and chargeback agree.
3. A pod's cost is split between prompt and generated tokens by work: a generated token weighs
   `generation_weight` prompt tokens (default 3, the usual ratio of output to input token
   prices), then divided by the tokens. The trend is the least-squares slope of the daily cost
   per million tokens, in percent of its mean per day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.core.config import Settings
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import workloads as queries

if TYPE_CHECKING:
    from gpuledger.warehouse.day_parts import DayParts, DayRead

GENERATION_WEIGHT = 3.0
"""How much more a generated token costs than a prompt token when a GPU-hour is split between
them (the default of every token-cost view: CLI, pages, the serving store's stored result)."""


@dataclass(frozen=True)
class TokenCosts:
    by_model: pl.DataFrame
    daily: pl.DataFrame
    generation_weight: float


def token_increases(wh: Warehouse, window: Window, lookback: timedelta = timedelta(days=1), *,
                    days: DayParts | None = None) -> pl.DataFrame:
    """Prompt and generated token increases per day, namespace, pod and model (step 1); each
    UTC day's counters read through `days` where the caller keeps day parts (a refresh)."""
    read: DayRead = queries.token_piece
    if days is not None:
        days.expect(wh, Window(window.start - lookback, window.end))  # the lookback's piece too
        read = days.through(queries.token_piece_version(), queries.token_piece)
    return queries.token_increases(wh, window.start, window.end, since=window.start - lookback, read=read)


def _with_unit_costs(frame: pl.DataFrame, weight: float) -> pl.DataFrame:
    work = pl.col("prompt_tokens") + weight * pl.col("generation_tokens")
    prompt_cost = pl.col("gpu_cost") * pl.col("prompt_tokens") / work
    gen_cost = pl.col("gpu_cost") * weight * pl.col("generation_tokens") / work
    tokens = pl.col("prompt_tokens") + pl.col("generation_tokens")
    return frame.with_columns(
        (prompt_cost / pl.col("prompt_tokens") * 1e6).alias("cost_per_m_prompt"),
        (gen_cost / pl.col("generation_tokens") * 1e6).alias("cost_per_m_generated"),
        (pl.col("gpu_cost") / tokens * 1e6).alias("cost_per_m_tokens"),
    ).with_columns(
        [pl.col(c).fill_nan(None) for c in ("cost_per_m_prompt", "cost_per_m_generated", "cost_per_m_tokens")]
    )


def _trend(values: list[float | None]) -> float | None:
    points = [(i, v) for i, v in enumerate(values) if v is not None and np.isfinite(v)]
    if len(points) < 2:
        return None
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    mean = float(y.mean())
    if mean == 0:
        return None
    slope = float(np.polyfit(x, y, 1)[0])
    return slope / mean * 100


def _series_costs(tokens: pl.DataFrame, bill: Bill) -> pl.DataFrame:
    """Step 2: each (day, namespace, pod, model) token series with its share of the pod's GPU
    cost that day (a pod serving several models shares its cost by their tokens)."""
    pod_cost = bill.allocated().group_by("day", "namespace", "pod").agg(
        pl.col("cost").sum().alias("pod_cost")).collect()
    share = pl.col("prompt_tokens") + pl.col("generation_tokens")
    return (
        tokens.join(pod_cost, on=["day", "namespace", "pod"], how="left")
        .with_columns(
            (pl.col("pod_cost").fill_null(0.0) * share / share.sum().over("day", "namespace", "pod"))
            .fill_nan(0.0).alias("gpu_cost")
        )
    )


def _sums() -> list[pl.Expr]:
    return [
        pl.col("prompt_tokens").sum(), pl.col("generation_tokens").sum(), pl.col("gpu_cost").sum(),
        pl.col("pod").n_unique().alias("pods"),
    ]


def token_costs(
    wh: Warehouse, window: Window, settings: Settings, *, bill: Bill | None = None,
    generation_weight: float = GENERATION_WEIGHT, days: DayParts | None = None,
) -> TokenCosts:
    """Cost per million prompt / generated tokens per model, overall and per day (steps 1-3)."""
    tokens = token_increases(wh, window, days=days)
    bill = bill or compute_bill(wh, window, settings, ("team",))
    per_series = _series_costs(tokens, bill)
    daily = _with_unit_costs(
        per_series.group_by("day", "model_name").agg(*_sums()), generation_weight,
    ).sort(["model_name", "day"])
    by_model = _with_unit_costs(per_series.group_by("model_name").agg(*_sums()), generation_weight)
    trends = {
        name: _trend(group["cost_per_m_tokens"].to_list())
        for (name,), group in daily.group_by("model_name", maintain_order=True)
    }
    by_model = by_model.with_columns(
        pl.col("model_name").replace_strict(trends, default=None, return_dtype=pl.Float64)
        .alias("trend_pct_per_day")
    ).sort("model_name")
    return TokenCosts(by_model=by_model, daily=daily, generation_weight=generation_weight)


def team_token_costs(
    wh: Warehouse, window: Window, settings: Settings, *, bill: Bill | None = None,
    generation_weight: float = GENERATION_WEIGHT, days: DayParts | None = None,
) -> pl.DataFrame:
    """The same costs per team and model service, for a team's page: `team, model_name, pods,
    prompt_tokens, generation_tokens, gpu_cost, cost_per_m_prompt, cost_per_m_generated,
    cost_per_m_tokens`, sorted by team and model.

    Token series in a namespace without an allocation in the bill have no team and are left
    out; summed over teams the rest equals `token_costs(...).by_model`. A unit cost with no
    tokens to divide by is NULL, as in `token_costs`.
    """
    tokens = token_increases(wh, window, days=days)
    bill = bill or compute_bill(wh, window, settings, ("team",))
    teams = (
        bill.allocated().select("namespace", "team").unique(maintain_order=True).collect()
        .sort("namespace", "team").unique("namespace", keep="first", maintain_order=True)
    )
    per_series = (
        _series_costs(tokens, bill).join(teams, on="namespace", how="left")
        .filter(pl.col("team").is_not_null())
    )
    return _with_unit_costs(
        per_series.group_by("team", "model_name").agg(*_sums()), generation_weight
    ).select(
        "team", "model_name", "pods", "prompt_tokens", "generation_tokens", "gpu_cost",
        "cost_per_m_prompt", "cost_per_m_generated", "cost_per_m_tokens",
    ).sort("team", "model_name")
