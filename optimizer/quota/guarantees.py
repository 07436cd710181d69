"""What a quota plan owes every team, whatever the queue system: a floor that respects what its
history cannot tell, and no more added pending time than a small share of its own demand.

1. Floors (`demand_floors`, decision 0170): each (queue, flavor, resource) keeps the larger of
   - its routine need: the configured quantile (default p90) of its own demand over the
     lookback, or over its last horizon if higher;
   - a burst reserve: `floor_keep_share` (20%) of its current quota, which it keeps unless the
     history covers at least `floor_evidence_windows` (4) windows of the horizon and in none of
     them did it need that much: then the reserve is its peak over those windows plus
     `floor_burst_share` (50%) of it for bursts (at least one unit), if that is lower.
   Both are capped at its current quota (a plan cuts quota down to the floor, it does not hand
   out quota because of it). A queue that had any demand is never cut to zero; one with none
   only when `plans.quota.allow_zero_quota` says so. Each floor says which term set it
   ("3: kept 20% of 16 for bursts"). Team minimums (`teams.guaranteed_gpus`) stay a separate,
   team-wide constraint of the model.
2. Fairness (`rise_violations`): replaying the same demand under the current and the proposed
   quotas, no queue's pending GPU-minutes may rise by more than `max_pending_rise_share` of its
   own demand. The fit enforces it on the fitting window (`optimizer.quota.fit`); the verdict
   on the held-out days of the backtest (`optimizer.quota.held_out`).
3. Winners and losers (`team_changes`): per team, GPUs, floor and pending GPU-minutes before
   and after.

Why here and not in the solver: the bound is on the replay (admission with cohort sharing),
which the linear model only approximates; a check on the replay itself is the promise a team
can hold the plan to. The Volcano and Kueue readers share these rules through `QuotaInputs`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from gpuledger.core.config_plans import QuotaPlanSettings
from gpuledger.core.errors import InputError
from gpuledger.optimizer.plan.evaluation import TeamChange
from gpuledger.optimizer.plan.render import duration_text
from gpuledger.optimizer.quota.demand import Demand
from gpuledger.optimizer.quota.replay import QuotaSet, ReplayResult
from gpuledger.optimizer.quota.spec import GPU, QueueSpec

QuotaKey = tuple[str, str, str]
"""(queue, flavor, resource)."""


@dataclass(frozen=True)
class Floor:
    """The least nominal quota a plan may give one series, and which rule set it."""

    units: int
    note: str


def team_of(q: QueueSpec) -> str:
    """The team a queue's quota belongs to: its owner, or the queue's own name."""
    return q.team or q.name


def demand_floors(queues: Iterable[QueueSpec], demand: Demand, rules: QuotaPlanSettings,
                  window: timedelta) -> dict[QuotaKey, Floor]:
    """Step 1: the floor of every (queue, flavor, resource), in whole units; `window` is the
    horizon (the last one is the recent past; whole ones are the evidence windows)."""
    q = rules.floor_quantile
    routine = np.maximum(_quantile(demand, q), _quantile(demand.window(demand.end - window), q))
    peaks, windows = _window_peaks(demand, window)
    used = demand.sampled.max(axis=0, initial=0.0) if demand.buckets else np.zeros(len(demand.keys))
    out: dict[QuotaKey, Floor] = {}
    for queue in queues:
        for (f, r), quota in queue.quotas.items():
            i = demand.index((queue.name, f, r))
            level, peak, had = (0.0, 0.0, False) if i is None else (
                float(routine[i]), float(peaks[i]), bool(used[i] > 0))
            out[(queue.name, f, r)] = floor_of(round(quota.nominal), level, peak, windows, had,
                                                  rules=rules, window=window)
    return out


def burst_allowance(seen: int, rules: QuotaPlanSettings) -> int:
    """What a floor measured as `seen` units adds for bursts: `floor_burst_share` of it, at least
    one unit (module docstring, step 1; the held-out repair adds the same)."""
    return max(1, math.ceil(rules.floor_burst_share * seen - 1e-9))


def floor_of(current: int, routine: float, peak: float, windows: int, had_demand: bool, *,
             rules: QuotaPlanSettings, window: timedelta) -> Floor:
    """One series' floor from its current quota, routine demand level and peak over `windows`
    whole windows of the horizon (module docstring, step 1)."""
    need = max(0, math.ceil(routine - 1e-9))
    share = rules.floor_keep_share
    kept = math.floor(share * current + 0.5)
    burst, burst_note = kept, f"kept {share:.0%} of {current:g} for bursts"
    if windows >= rules.floor_evidence_windows:
        seen = max(0, math.ceil(peak - 1e-9))
        allowance = burst_allowance(seen, rules)
        if seen + allowance < kept:
            burst = seen + allowance
            burst_note = (f"peak {seen} over {windows} x {duration_text(window)} + {allowance} for bursts "
                          f"(not {share:.0%} of {current:g})")
    else:
        burst_note += f" ({windows} of {rules.floor_evidence_windows} x {duration_text(window)} of evidence)"
    if not had_demand and rules.allow_zero_quota:
        return Floor(0, "no demand: zero allowed")
    level = max(need, burst)
    if level >= current:
        return Floor(current, f"its quota (p{round(rules.floor_quantile * 100)} of its demand is {need})"
                     if need >= burst else "its quota (" + burst_note + ")")
    note = f"p{round(rules.floor_quantile * 100)} of its demand" if need >= burst else burst_note
    if level == 0 and current >= 1:
        return Floor(1, "it had demand: never zero" if had_demand else "never zero (allow_zero_quota off)")
    return Floor(level, note)


def _quantile(demand: Demand, q: float) -> np.ndarray:
    """Per series, the quantile over every sampled bucket (no rows: zeros)."""
    sampled = demand.sampled
    return np.quantile(sampled, q, axis=0) if sampled.shape[0] else np.zeros(len(demand.keys))


def _window_peaks(demand: Demand, window: timedelta) -> tuple[np.ndarray, int]:
    """Per series, the largest demand over the whole windows of `window` counted back from the
    end of the history, and how many there are (the evidence a floor may be released on)."""
    rows = max(1, round(window / demand.step))
    whole = demand.buckets // rows
    if whole == 0:
        return np.zeros(len(demand.keys)), 0
    recent = demand.values[demand.buckets - whole * rows:]
    return recent.max(axis=0), whole


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
                 floors: Mapping[QuotaKey, Floor], *, before: ReplayResult, after: ReplayResult
                 ) -> tuple[TeamChange, ...]:
    """Step 3: per team, whole-GPU quota (`nvidia.com/gpu`; MIG instances are not GPUs), its
    floor and why, and pending GPU-minutes before and after, winners and losers alike, sorted
    by team."""
    fields = ("gpus_before", "gpus_after", "floor_gpus", "pending_before", "pending_after", "demand")
    rows: dict[str, dict[str, float]] = {}
    notes: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for q in queues:
        team = team_of(q)
        row = rows.setdefault(team, dict.fromkeys(fields, 0.0))
        for f, r in sorted(q.quotas):
            if r == GPU:
                row["gpus_before"] += old[(q.name, f, r)].nominal
                row["gpus_after"] += new[(q.name, f, r)].nominal
                floor = floors.get((q.name, f, r))
                if floor is not None:
                    row["floor_gpus"] += floor.units
                    notes[team].append((f"{q.name}/{f}", f"{floor.units}: {floor.note}"))
        row["pending_before"] += before.per_queue_pending.get(q.name, 0.0)
        row["pending_after"] += after.per_queue_pending.get(q.name, 0.0)
        row["demand"] += after.per_queue_demand.get(q.name, 0.0)
    return tuple(TeamChange(team=t, floor_note=_floor_note(notes[t]),
                            **{k: round(v, 1) for k, v in row.items()})
                 for t, row in sorted(rows.items()))


def _floor_note(parts: list[tuple[str, str]]) -> str:
    """One series: "3: kept 20% of 16 for bursts"; several: each prefixed with queue/flavor."""
    if len(parts) == 1:
        return parts[0][1]
    return "; ".join(f"{where} {text}" for where, text in parts)
