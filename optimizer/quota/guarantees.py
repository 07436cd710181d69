"""What a quota plan owes every team, whatever the queue system: a floor from its own demand, and
no more added pending time than a small share of its own demand.

1. Floors (`demand_floors`): each (queue, flavor, resource) keeps at least the configured
   quantile (default p90) of its own demand over the lookback, capped at its current quota (a
   plan cuts quota down to the floor, it does not hand out quota because of it). A queue that
   had any demand is never cut to zero; one with none is cut to zero only when
   `plans.quota.allow_zero_quota` says so. Team minimums (`teams.guaranteed_gpus`) stay a
   separate, team-wide constraint of the model.
2. Fairness (`rise_violations`): replaying the same demand under the current and the proposed
   quotas, no queue's pending GPU-minutes may rise by more than `max_pending_rise_share` of its
   own demand. The fit enforces it on the fitting window by raising an offender's floors to its
   current quota and solving again; the backtest reports it on held-out days.
3. Winners and losers (`team_changes`): per team, GPUs and pending GPU-minutes before and after.

Why here and not in the solver: the bound is on the replay (admission with cohort sharing),
which the linear model only approximates; a check on the replay itself is the promise a team
can hold the plan to. The Volcano and Kueue readers share these rules through `QuotaInputs`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.optimizer.plan.evaluation import TeamChange
from gpuledger.optimizer.quota.replay import QuotaSet, ReplayResult
from gpuledger.optimizer.quota.spec import GPU, QueueSpec

QuotaKey = tuple[str, str, str]
"""(queue, flavor, resource)."""


def team_of(q: QueueSpec) -> str:
    """The team a queue's quota belongs to: its owner, or the queue's own name."""
    return q.team or q.name


def demand_floors(queues: Iterable[QueueSpec], history: pl.DataFrame, quantile: float,
                  allow_zero: bool) -> dict[QuotaKey, int]:
    """Step 1: the floor of every (queue, flavor, resource), in whole units.

    The quantile is over every sample time of the history: a time without a row for the series
    counts as no demand (how the history reports a quiet queue)."""
    times = max(1, history["ts"].n_unique()) if not history.is_empty() else 1
    grouped = _series_values(history)
    out: dict[QuotaKey, int] = {}
    for q in queues:
        for (f, r), quota in q.quotas.items():
            current = round(quota.nominal)
            values = grouped.get((q.name, f, r), np.zeros(0))
            padded = np.concatenate([values, np.zeros(max(0, times - values.size))])
            level = float(np.quantile(padded, quantile)) if padded.size else 0.0
            floor = min(current, math.ceil(level - 1e-9))
            if current >= 1 and floor == 0 and (values.max(initial=0.0) > 0 or not allow_zero):
                floor = 1
            out[(q.name, f, r)] = max(0, floor)
    return out


def _series_values(history: pl.DataFrame) -> dict[QuotaKey, np.ndarray]:
    """Each series' demand values as one numpy slice of a single sorted column (no Python
    lists: a month at one-minute samples is millions of rows)."""
    if history.is_empty():
        return {}
    ordered = history.select("cluster_queue", "flavor", "resource", "demand").sort(
        "cluster_queue", "flavor", "resource")
    keys = ordered.select("cluster_queue", "flavor", "resource").unique(maintain_order=True)
    sizes = ordered.group_by("cluster_queue", "flavor", "resource", maintain_order=True).len()["len"]
    values = ordered["demand"].to_numpy()
    ends = np.cumsum(sizes.to_numpy())
    return {(a, b, c): values[end - n:end]
            for (a, b, c), n, end in zip(keys.iter_rows(), sizes.to_list(), ends, strict=True)}


def check_floors(floors: Mapping[QuotaKey, int], queues: Iterable[QueueSpec],
                 capacity: Mapping[tuple[str, str, str], int]) -> None:
    """Floors must fit each pool's capacity (they can only overflow a capacity set below the
    current quotas)."""
    need: dict[tuple[str, str, str], int] = defaultdict(int)
    for q in queues:
        for f, r in q.quotas:
            need[(q.pool, f, r)] += floors.get((q.name, f, r), 0)
    for key, total in sorted(need.items()):
        have = capacity.get(key, 0)
        if total > have:
            raise InputError(
                f"cohort {key[0]} {key[1]} {key[2]}: the queues' demand floors add up to {total} but "
                f"capacity is {have}: lower plans.quota.floor_quantile or add capacity"
            )


def rise_shares(before: ReplayResult, after: ReplayResult) -> dict[str, float]:
    """Step 2: per queue, (pending after − pending before) / its demand in the replay."""
    out = {}
    for name, asked in after.per_queue_demand.items():
        rise = after.per_queue_pending.get(name, 0.0) - before.per_queue_pending.get(name, 0.0)
        out[name] = rise / asked if asked > 0 else (0.0 if rise <= 1e-9 else float("inf"))
    return out


def rise_violations(pairs: Iterable[tuple[ReplayResult, ReplayResult]], bound: float) -> set[str]:
    """Queues whose pending rises by more than `bound` of their demand in any (before, after)."""
    return {name for before, after in pairs for name, share in rise_shares(before, after).items()
            if share > bound + 1e-9}


def team_changes(queues: Iterable[QueueSpec], old: QuotaSet, new: QuotaSet,
                 floors: Mapping[QuotaKey, int], *, before: ReplayResult, after: ReplayResult
                 ) -> tuple[TeamChange, ...]:
    """Step 3: per team, whole-GPU quota (`nvidia.com/gpu`; MIG instances are not GPUs) and
    pending GPU-minutes before and after, winners and losers alike, sorted by team."""
    fields = ("gpus_before", "gpus_after", "floor_gpus", "pending_before", "pending_after", "demand")
    rows: dict[str, dict[str, float]] = {}
    for q in queues:
        row = rows.setdefault(team_of(q), dict.fromkeys(fields, 0.0))
        for f, r in q.quotas:
            if r == GPU:
                row["gpus_before"] += old[(q.name, f, r)].nominal
                row["gpus_after"] += new[(q.name, f, r)].nominal
                row["floor_gpus"] += floors.get((q.name, f, r), 0)
        row["pending_before"] += before.per_queue_pending.get(q.name, 0.0)
        row["pending_after"] += after.per_queue_pending.get(q.name, 0.0)
        row["demand"] += after.per_queue_demand.get(q.name, 0.0)
    return tuple(TeamChange(team=t, **{k: round(v, 1) for k, v in row.items()})
                 for t, row in sorted(rows.items()))
