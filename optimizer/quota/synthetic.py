"""Seeded synthetic Kueue setups with seasonal demand, for benchmarks and tests.

Each team has one ClusterQueue in one cohort and uses a few flavors. Its demand per flavor is
a base level times a daily cycle (peak at a team-specific hour) times a weekday/weekend factor,
plus noise and occasional bursts. The current quotas are a static split: capacity divided by
fair-sharing weight, not by demand, which is what a hand-maintained quota file tends to be.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from gpuledger.optimizer.quota.inputs import QuotaInputs, check_history
from gpuledger.optimizer.quota.queues.kueue import queue_from_object
from gpuledger.optimizer.quota.spec import GPU, QueueSpec, default_capacity


def synthetic_quota_inputs(
    teams: int = 10, flavors: int = 3, *, days: int = 28, step: timedelta = timedelta(minutes=15),
    start: datetime, seed: int = 0, load: float = 0.85, flavors_per_team: int = 3,
    borrowing_limit: float | None = None, drift: float = 0.0,
) -> QuotaInputs:
    """`load` is mean peak-hour demand over capacity, per flavor. `drift` makes demand move
    over the history: each team's level changes linearly from (1 − d) to (1 + d) times its
    base, or the reverse, with d drawn up to `drift` per team (a second seeded stream, so the
    history without drift is unchanged).

    1. Draw each team's weight and flavors, then its demand series (one seeded stream: the
       order of draws is part of the output).
    2. Capacity per flavor from the demand's daily peaks; current quotas split it by weight.
    3. One Kueue ClusterQueue per team in cohort `all`, and the demand as history.
    """
    rng = random.Random(seed)
    names = [f"team-{i:02d}" for i in range(teams)]
    flavor_names = [f"flavor-{j:02d}" for j in range(flavors)]
    weights = {n: rng.choice([1.0, 1.0, 2.0, 3.0]) for n in names}
    uses = {n: sorted(rng.sample(flavor_names, min(flavors_per_team, flavors))) for n in names}
    steps = int(timedelta(days=days) / step)
    series = _demand(rng, np.random.default_rng(seed), uses, start=start, step=step, steps=steps)
    if drift:
        series = _drift(series, drift, seed, steps)
    capacity = {f: _capacity(series, f, days, steps, load) for f in flavor_names}
    nominal = _static_split(flavor_names, names, uses, weights, capacity)
    qs = tuple(_queue(n, weights[n], uses[n], nominal, borrowing_limit) for n in names)
    ts = [start + i * step for i in range(steps)]
    frames = [
        pl.DataFrame({"ts": ts, "cluster_queue": n, "flavor": f, "resource": GPU, "demand": v})
        for (n, f), v in sorted(series.items())
    ]
    history, inferred = check_history(pl.concat(frames), "synthetic")
    return QuotaInputs(qs, default_capacity(qs), history, inferred, {}, f"synthetic(teams={teams}, "
                       f"flavors={flavors}, days={days}, seed={seed})")


def _demand(rng: random.Random, np_rng: np.random.Generator, uses: dict[str, list[str]], *,
            start: datetime, step: timedelta, steps: int) -> dict[tuple[str, str], np.ndarray]:
    """Step 1: per (team, flavor), base × daily cycle × weekday factor + noise + bursts."""
    hours = np.array([(start + i * step).hour + (start + i * step).minute / 60 for i in range(steps)])
    weekday = np.array([(start + i * step).weekday() for i in range(steps)])
    series: dict[tuple[str, str], np.ndarray] = {}
    for n, flavors in uses.items():  # team order: `uses` is built in `names` order
        peak_hour = rng.uniform(8, 20)
        weekend = rng.uniform(0.2, 0.8)
        for f in flavors:
            base = rng.uniform(2, 12)
            daily = 0.55 + 0.45 * np.cos(2 * math.pi * (hours - peak_hour) / 24)
            week = np.where(weekday >= 5, weekend, 1.0)
            noise = np_rng.normal(0, 0.08 * base, steps)
            bursts = (np_rng.random(steps) < 0.002) * base * np_rng.uniform(0.5, 1.5, steps)
            series[(n, f)] = np.maximum(0.0, base * daily * week + noise + np.convolve(
                bursts, np.ones(8), mode="same"))
    return series


def _drift(series: dict[tuple[str, str], np.ndarray], drift: float, seed: int, steps: int
           ) -> dict[tuple[str, str], np.ndarray]:
    """Per team a linear trend over the history, up or down."""
    rng = np.random.default_rng(seed + 1_000_003)
    teams = sorted({n for n, _ in series})
    slope = dict(zip(teams, rng.uniform(-drift, drift, len(teams)), strict=True))
    ramp = np.linspace(-1.0, 1.0, steps)
    return {(n, f): np.maximum(0.0, v * (1 + slope[n] * ramp)) for (n, f), v in series.items()}


def _capacity(series: dict[tuple[str, str], np.ndarray], flavor: str, days: int, steps: int,
              load: float) -> int:
    """Step 2: `load` × the mean daily peak of the flavor's total demand."""
    total = sum((v for (n, ff), v in series.items() if ff == flavor), np.zeros(steps))
    per_day = total.reshape(days, -1).max(axis=1)
    return max(1, round(float(per_day.mean()) / load))


def _static_split(flavor_names: list[str], names: list[str], uses: dict[str, list[str]],
                  weights: dict[str, float], capacity: dict[str, int]) -> dict[tuple[str, str], int]:
    """Step 2: current quotas, capacity split by weight among the flavor's users (largest remainder)."""
    nominal: dict[tuple[str, str], int] = {}
    for f in flavor_names:
        users = [n for n in names if f in uses[n]]
        if not users:
            continue
        raw = [capacity[f] * weights[n] / sum(weights[u] for u in users) for n in users]
        floors = [math.floor(x) for x in raw]
        for k in sorted(range(len(raw)), key=lambda k: -(raw[k] - floors[k]))[: capacity[f] - sum(floors)]:
            floors[k] += 1
        nominal.update({(n, f): q for n, q in zip(users, floors, strict=True)})
    return nominal


def _queue(name: str, weight: float, flavors: list[str], nominal: dict[tuple[str, str], int],
           borrowing_limit: float | None) -> QueueSpec:
    """Step 3: the team's ClusterQueue."""
    resources = [{"name": GPU, "nominalQuota": nominal[(name, f)],
                  **({"borrowingLimit": borrowing_limit} if borrowing_limit is not None else {})}
                 for f in flavors]
    spec = {
        "cohortName": "all", "fairSharing": {"weight": str(weight)},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": f, "resources": [r]} for f, r in zip(flavors, resources, strict=True)]}],
    }
    return queue_from_object({"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}, "synthetic")
