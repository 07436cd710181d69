"""GPU time lost to preemption, priced: per victim, and per team, queue and priority class.

A preempted pod's work since its start (or since its last checkpoint, when the workload
records one) is thrown away: the cards were held and billed, and the result is gone. So
the loss is `gpus x (preempted_at - max(run_start, checkpoint_at))` GPU-hours, priced at the
list price of the victim's card model on the day of the preemption (`price_book`, else the
default catalog, else zero and `unpriced`).

The loss is *part of* the billed card-hours, not added to them: the bill's lines and their
conservation are untouched, and the preemption frame is a "thereof" view beside them.

Victims come from `warehouse.queries.volcano.preemptions_between` (a pod condition's own facts,
or the stored pods of a preempted Workload/PodGroup or of a pod named by a scheduler event).
Counts: whole GPUs and MIG instances (`collectors.preemption.gpu_count`'s rule, applied here to
the stored requests). A lost MIG instance-hour is priced at the instance's share of the card
(`analytics.devices.shares.raw_mig_share` under `sharing.mig_share_basis`, the rule the bill uses; under
`max_normalized` before the layout's normalization, so at most the billed share), not a whole
card's hour: `lost_card_hours` = lost GPU-hours x (card share of the request / its GPU count),
and `lost_cost` prices those. A victim whose requests are unknown counts whole cards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl

from gpuledger.analytics.billing.prices import price_table
from gpuledger.analytics.devices.shares import raw_mig_share
from gpuledger.analytics.teams.namespaces import team_history, with_teams
from gpuledger.core.config import Settings
from gpuledger.core.pricing import PriceBook
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.volcano import last_pod_requests, node_models, preemptions_between

GROUPS: tuple[str, ...] = ("team", "queue", "priority_class")
"""The dimensions preemption losses are reported by."""
NO_CLASS = "(none)"
"""The priority class shown for pods that name none (Kubernetes gives them priority 0)."""
LOSS_COLUMNS = ("preemptions", "lost_gpu_hours", "lost_cost")


def _gpus(text: str | None) -> float | None:
    if text is None:
        return None
    requests = json.loads(text)
    return float(sum(v for k, v in requests.items()
                     if k == "nvidia.com/gpu" or k.startswith("nvidia.com/mig-")))


MIG_PREFIX = "nvidia.com/mig-"


def card_share(text: str | None, model: str | None, basis: str) -> float | None:
    """Cards' worth of a pod's GPU requests (JSON): a whole GPU is one card, a MIG instance its
    profile's share on `model` by `basis`; None when the requests are unknown."""
    if text is None:
        return None
    total = 0.0
    for key, count in json.loads(text).items():
        if key == "nvidia.com/gpu":
            total += float(count)
        elif key.startswith(MIG_PREFIX):
            share = raw_mig_share(model, key.removeprefix(MIG_PREFIX), basis) if model else 1.0
            total += float(count) * share
    return total


def _card_shares(basis: str) -> pl.Expr:
    """Per victim (columns `requests`, `model`, `gpus`): cards' worth per counted GPU (1 when
    the requests are unknown)."""
    share = pl.struct("requests", "model").map_elements(
        lambda r: card_share(r["requests"], r["model"], basis), return_dtype=pl.Float64)
    return pl.when(pl.col("gpus") > 0).then(share / pl.col("gpus")).otherwise(None).fill_null(1.0)


def preemption_losses(wh: Warehouse, window: Window, settings: Settings) -> pl.DataFrame:
    """One row per victim pod preempted in `window`: who, when, from when its work was lost,
    GPUs, lost GPU-hours, the model's unit price and the lost cost."""
    raw = preemptions_between(wh, window.start, window.end)
    if raw.is_empty():
        return _empty()
    frame = raw.with_columns(
        pl.coalesce("gpus", pl.col("gpu_requests").map_elements(_gpus, return_dtype=pl.Float64))
        .alias("gpus"),
        pl.max_horizontal("run_start", "checkpoint_at").alias("lost_from"),
        pl.col("priority_class").fill_null("").replace("", NO_CLASS),
        pl.col("preempted_at").dt.date().alias("day"),
    ).with_columns(
        (pl.col("gpus").fill_null(0.0) * ((pl.col("preempted_at") - pl.col("lost_from"))
                                          .dt.total_microseconds().clip(0) / 3.6e9)).alias("lost_gpu_hours"),
    )
    models, stored = node_models(wh), last_pod_requests(wh)
    frame = frame.join(models, on="node", how="left").join(stored, on=["namespace", "pod"], how="left")
    frame = frame.with_columns(pl.coalesce("gpu_requests", "stored").alias("requests"))
    frame = frame.with_columns(
        (pl.col("lost_gpu_hours") * _card_shares(settings.sharing.mig_share_basis)).alias("lost_card_hours"))
    prices = price_table(PriceBook(settings), frame["model"].drop_nulls().unique().to_list(), window)
    teams = team_history(wh, settings, window)  # the team in force when the pod was preempted
    frame = with_teams(frame, teams, settings, pl.col("preempted_at"))
    frame = frame.join(prices, on=["model", "day"], how="left")
    return frame.with_columns(
        pl.col("team").fill_null("unattributed"),
        pl.col("unit_price").fill_null(0.0),
        (pl.col("unpriced").fill_null(True)),
    ).with_columns((pl.col("lost_card_hours") * pl.col("unit_price")).alias("lost_cost")).select(
        "namespace", "pod", "team", "queue", "priority_class", "source", "preempted_at", "lost_from",
        "gpus", "lost_gpu_hours", "lost_card_hours", "model", "unit_price", "lost_cost", "unpriced",
    ).sort("preempted_at", "namespace", "pod")


def _empty() -> pl.DataFrame:
    schema: dict[str, pl.DataType] = {"namespace": pl.String(), "pod": pl.String(), "team": pl.String(),
              "queue": pl.String(), "priority_class": pl.String(), "source": pl.String(),
              "preempted_at": pl.Datetime("us", "UTC"), "lost_from": pl.Datetime("us", "UTC"),
              "gpus": pl.Float64(), "lost_gpu_hours": pl.Float64(), "lost_card_hours": pl.Float64(),
              "model": pl.String(),
              "unit_price": pl.Float64(), "lost_cost": pl.Float64(), "unpriced": pl.Boolean()}
    return pl.DataFrame(schema=schema)


def preemption_lines(losses: pl.DataFrame, by: Sequence[str] = GROUPS) -> pl.DataFrame:
    """Losses summed by `by` (team, queue, priority class by default), largest cost first."""
    keys = list(by)
    return losses.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("preemptions"), pl.col("lost_gpu_hours").sum(),
        pl.col("lost_cost").sum(),
    ).sort(["lost_cost", "lost_gpu_hours", *keys], descending=[True, True, *[False] * len(keys)],
           nulls_last=True)


def lines_json(lines: pl.DataFrame) -> list[dict[str, object]]:
    """The `preemption` list of the bill's JSON: hours to 6 decimals, money to cents."""
    return [{k: (round(v, 6) if k == "lost_gpu_hours" else round(v, 2) if k == "lost_cost" else v)
             for k, v in row.items()} for row in lines.iter_rows(named=True)]


def preemption_totals(lines: pl.DataFrame | None, team: str | None = None) -> dict[str, float]:
    """`lost_gpu_hours` and `lost_cost` of a bill's preemption lines (one team's, or all)."""
    if lines is None or lines.is_empty():
        return {"lost_gpu_hours": 0.0, "lost_cost": 0.0}
    own = lines if team is None else lines.filter(pl.col("team") == team)
    return {"lost_gpu_hours": float(own["lost_gpu_hours"].sum()), "lost_cost": float(own["lost_cost"].sum())}
