"""A seeded, real-shaped month of per-team GPU demand and the quotas it ran under (issue 30).

Synthetic, but shaped like a real cluster's month rather than like `optimizer.quota.synthetic`'s
smooth curves. What is modelled, and how:
- demand is jobs, not a curve: each team submits jobs at a Poisson rate that follows a working
  day (busy 09-19 UTC, a trickle at night) and a week (weekends at a quarter of the weekday
  rate); a job asks for 1, 2, 4 or 8 GPUs (team-specific mix) and runs for a log-normal
  time (team-specific median, heavy tail); a team's demand each minute is the GPUs of its jobs
  that have arrived and not finished (running or pending), so it is integral and bursty;
- per minute for 30 days (43,200 samples per team), one flavor in one cohort;
- the quotas it ran under are a hand-kept split of the cohort's 136 GPUs that no longer matches
  demand: some teams ask for about twice their quota at the daily peak, others use a fraction;
- one team (`quiet-burst`) holds 16 GPUs, needs at most 1 GPU for its first three weeks, then
  submits 2-3 GPU jobs on its working days (the case of issue 30: cut to its p90 it waits).

What is not modelled: preemption, gang scheduling, jobs that span flavors, queueing feedback
(a real team submits less when it waits). The fit uses the first 21 days; the rest is held out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from gpuledger.optimizer.quota.inputs import QuotaInputs, check_history
from gpuledger.optimizer.quota.queues.kueue import queue_from_object
from gpuledger.optimizer.quota.spec import GPU, default_capacity

START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
DAYS = 30
FIT_DAYS = 21
FLAVOR = "h100"
COHORT = "gpu"


@dataclass(frozen=True)
class Team:
    name: str
    quota: int
    jobs_per_workday: float
    sizes: tuple[float, float, float, float]
    """Probability of a 1, 2, 4, 8-GPU job."""
    median_h: float


TEAMS = (
    Team("llm-train", 16, 9.0, (0.05, 0.15, 0.3, 0.5), 5.0),
    Team("vision", 16, 30.0, (0.3, 0.4, 0.25, 0.05), 2.0),
    Team("speech", 8, 26.0, (0.4, 0.4, 0.2, 0.0), 2.0),
    Team("recsys", 16, 6.0, (0.4, 0.4, 0.2, 0.0), 1.5),
    Team("research-a", 12, 14.0, (0.2, 0.4, 0.3, 0.1), 3.0),
    Team("research-b", 12, 5.0, (0.5, 0.4, 0.1, 0.0), 1.5),
    Team("infer-eval", 8, 30.0, (0.7, 0.3, 0.0, 0.0), 1.5),
    Team("data-gen", 8, 8.0, (0.2, 0.5, 0.3, 0.0), 4.0),
    Team("robotics", 8, 4.0, (0.6, 0.4, 0.0, 0.0), 2.0),
    Team("interns", 8, 3.0, (0.8, 0.2, 0.0, 0.0), 1.0),
    Team("quiet-burst", 16, 0.0, (1.0, 0.0, 0.0, 0.0), 1.0),
    Team("platform", 8, 2.0, (1.0, 0.0, 0.0, 0.0), 6.0),
)
"""Capacity = the quotas' sum, 136 GPUs."""


def _rate(minutes: np.ndarray) -> np.ndarray:
    """Relative arrival rate per minute: a working day and a week (1.0 = a weekday at noon)."""
    hour = (minutes // 60) % 24
    day = (minutes // (60 * 24)) % 7  # 0 = Monday
    daily = np.where((hour >= 9) & (hour < 19), 1.0, 0.08)
    return daily * np.where(day >= 5, 0.25, 1.0)


def _jobs(rng: np.random.Generator, team: Team, minutes: int, rate: np.ndarray) -> np.ndarray:
    """One team's GPUs asked per minute, from its jobs (module docstring)."""
    per_minute = team.jobs_per_workday / (10 * 60) * rate  # ~10 busy hours a weekday
    starts = np.flatnonzero(rng.random(minutes) < per_minute)
    sizes = rng.choice([1.0, 2.0, 4.0, 8.0], size=starts.size, p=team.sizes)
    runs = np.maximum(5, rng.lognormal(np.log(team.median_h * 60), 0.8, starts.size)).astype(np.int64)
    return _active(starts, runs, sizes, minutes)


def _active(starts: np.ndarray, runs: np.ndarray, sizes: np.ndarray, minutes: int) -> np.ndarray:
    delta = np.zeros(minutes + 1)
    np.add.at(delta, starts, sizes)
    np.add.at(delta, np.minimum(starts + runs, minutes), -sizes)
    return np.cumsum(delta)[:minutes]


def _quiet_burst(rng: np.random.Generator, minutes: int) -> np.ndarray:
    """At most 1 GPU for three weeks (a notebook now and then), then 2-3 GPU jobs on working
    days."""
    fit = FIT_DAYS * 24 * 60
    notebook = rng.random(fit) < 0.004  # a notebook starts ~6 times a day
    starts = np.flatnonzero(notebook)
    quiet = np.minimum(1.0, _active(starts, rng.integers(20, 120, starts.size), np.ones(starts.size), fit))
    later = np.arange(fit, minutes)
    busy = (_rate(later) >= 1.0) & ((later // 60) % 24 >= 10) & ((later // 60) % 24 < 16)
    burst = np.where(busy, rng.choice([2.0, 3.0], size=later.size, p=[0.5, 0.5]), 0.0)
    burst = np.repeat(burst[::30], 30)[: later.size]  # 2-3 GPUs in half-hour blocks
    return np.concatenate([quiet, burst])


def real_shaped_month(seed: int = 30) -> tuple[list[str], np.ndarray, dict[str, int]]:
    """(team names, minutes x teams GPUs asked, the quotas it ran under)."""
    rng = np.random.default_rng(seed)
    minutes = DAYS * 24 * 60
    rate = _rate(np.arange(minutes))
    columns = [_quiet_burst(rng, minutes) if t.name == "quiet-burst" else _jobs(rng, t, minutes, rate)
               for t in TEAMS]
    return [t.name for t in TEAMS], np.column_stack(columns), {t.name: t.quota for t in TEAMS}


def as_inputs(names: list[str], demand: np.ndarray, quotas: dict[str, int], start: datetime = START
              ) -> QuotaInputs:
    """The month (or a slice of it starting at `start`) as quota inputs: one Kueue ClusterQueue
    per team in one cohort, nominal = the quota it ran under."""
    queues = tuple(queue_from_object({"metadata": {"name": n}, "spec": {
        "cohortName": COHORT, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": quotas[n]}]}]}]}},
        "real-shaped") for n in names)
    ts = pl.datetime_range(start, start + timedelta(minutes=demand.shape[0] - 1), "1m", eager=True,
                           time_zone="UTC")
    frame = pl.concat([pl.DataFrame({"ts": ts, "cluster_queue": n, "flavor": FLAVOR, "resource": GPU,
                                     "demand": demand[:, i]}) for i, n in enumerate(names)])
    history, step = check_history(frame, "real-shaped", queues)
    return QuotaInputs(queues, default_capacity(queues), history, step, source="real-shaped month")
