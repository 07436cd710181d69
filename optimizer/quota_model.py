"""The quota model: nominal quota, borrowing and lending limit per (queue, flavor, resource).

Variables (integers, in resource units): N nominal, B borrowing limit, L lending limit.
Constraints:
- per pool (cohort, flavor, resource): sum of N ≤ capacity;
- L ≤ N (Kueue's rule); B ≤ capacity − N (borrowing more than the rest of the cohort is moot);
- per team with a guaranteed minimum: the GPUs it can never lend, sum of (N − L) over its
  queues' `nvidia.com/gpu` quotas, is at least the minimum.

Objective, lexicographic (stages, each keeping the previous optimum as a constraint):
1. expected unmet demand: E[(D − N)⁺] + E[(D − N − B)⁺] over the forecast scenarios (demand
   above nominal must borrow; demand above nominal + borrowing limit cannot run). Both are
   convex piecewise-linear in an integer quota, so each is the maximum of its tangent lines
   at the kinks: exact, and a strong LP relaxation;
2. fairness, DRF-style with Kueue's weights: the largest weighted dominant shortfall,
   max over queues of (max over resources of E[(D − N)⁺] / capacity) / weight;
3. stability: total |change| of N, B and L from the current quotas (an unset borrowing limit
   counts as capacity − N, an unset lending limit as N).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from optimizer.plan import StageResult

SCALE = 100
"""Expected unmet is in resource-hours × SCALE (integers for CP-SAT)."""
SHARE_SCALE = 1_000_000


@dataclass(frozen=True)
class SeriesSpec:
    """One (queue, flavor, resource) with its scenarios and current quota."""

    queue: str
    flavor: str
    resource: str
    pool: str
    weight: float
    scenarios: np.ndarray
    """Demand values (resource units), one per equally likely scenario-hour."""
    hours: float
    """Horizon length in hours: expected unmet = mean shortfall × hours."""
    old_nominal: int
    old_borrowing: int | None
    old_lending: int | None
    shares_cohort: bool


@dataclass(frozen=True)
class QuotaProblem:
    series: tuple[SeriesSpec, ...]
    capacity: Mapping[tuple[str, str, str], int]
    guaranteed: Mapping[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    """team → (GPUs, indices of its `nvidia.com/gpu` series)."""


@dataclass
class QuotaSolution:
    nominal: list[int]
    borrowing: list[int]
    lending: list[int]
    stages: list[StageResult] = field(default_factory=list)
    status: str = "OPTIMAL"
    wall_s: float = 0.0


STAGES = ("expected_unmet", "weighted_shortfall", "quota_change")


def shortfall_table(scenarios: np.ndarray, hours: float, top: int) -> list[int]:
    """E[(D − n)⁺] × hours × SCALE for n = 0..top (convex, non-increasing)."""
    values = np.sort(np.asarray(scenarios, dtype=float))
    if values.size == 0:
        return [0] * (top + 1)
    suffix = np.concatenate([np.cumsum(values[::-1])[::-1], [0.0]])
    out = []
    for n in range(top + 1):
        k = int(np.searchsorted(values, n, side="right"))
        total = suffix[k] - n * (values.size - k)
        out.append(math.ceil(total / values.size * hours * SCALE - 1e-9))
    return _convex_hull(out)


def _convex_hull(values: list[int]) -> list[int]:
    """Rounding can break convexity by a unit; make the differences non-decreasing again
    (each value moves up by at most a few units of 1/SCALE)."""
    out = [values[0]]
    slope = None
    for k in range(len(values) - 1):
        d = values[k + 1] - values[k]
        slope = d if slope is None else max(slope, d)
        out.append(out[-1] + slope)
    return out


def _tangents(table: Sequence[int]) -> list[tuple[int, int, int]]:
    """(k, f(k), slope to k+1) at every kink of a convex table, plus the last point."""
    out = []
    prev_slope = None
    for k in range(len(table) - 1):
        slope = table[k + 1] - table[k]
        if slope != prev_slope:
            out.append((k, table[k], slope))
            prev_slope = slope
    return out or [(0, table[0], 0)]


class _Model:
    def __init__(self, p: QuotaProblem) -> None:
        self.p = p
        m = self.m = cp_model.CpModel()
        self.n: list[cp_model.IntVar] = []
        self.b: list[cp_model.IntVar] = []
        self.l: list[cp_model.IntVar] = []
        unmet_terms = []
        self.short: list[cp_model.IntVar] = []
        for i, s in enumerate(p.series):
            cap = p.capacity[(s.pool, s.flavor, s.resource)]
            n = m.new_int_var(0, cap, f"n{i}")
            b = m.new_int_var(0, cap if s.shares_cohort else 0, f"b{i}")
            lend = m.new_int_var(0, cap if s.shares_cohort else 0, f"l{i}")
            m.add(lend <= n)
            m.add(b + n <= cap)
            # 1. expected unmet above N and above N + B (tangent lines of convex tables)
            table = shortfall_table(s.scenarios, s.hours, cap)
            above_n = m.new_int_var(0, table[0], f"sn{i}")
            for k, fk, slope in _tangents(table):
                m.add(above_n >= fk + slope * (n - k))
            above_nb = m.new_int_var(0, table[0], f"snb{i}")
            for k, fk, slope in _tangents(table):
                m.add(above_nb >= fk + slope * (n + b - k))
            unmet_terms += [above_n, above_nb]
            self.short.append(above_n)
            self.n.append(n)
            self.b.append(b)
            self.l.append(lend)
        pools: dict[tuple[str, str, str], list[int]] = {}
        for i, s in enumerate(p.series):
            pools.setdefault((s.pool, s.flavor, s.resource), []).append(i)
        for key, idx in pools.items():
            m.add(sum(self.n[i] for i in idx) <= p.capacity[key])
        for gpus, members in p.guaranteed.values():
            m.add(sum(self.n[i] - self.l[i] for i in members) >= gpus)
        # 2. weighted dominant shortfall
        worst = m.new_int_var(0, 10**15, "worst")
        for i, s in enumerate(p.series):
            cap = max(1, p.capacity[(s.pool, s.flavor, s.resource)])
            factor = max(1, round(SHARE_SCALE / (cap * max(s.weight, 1e-3))))
            m.add(worst >= factor * self.short[i])
        # 3. change from the current quotas
        changes: list[cp_model.IntVar] = []
        for i, s in enumerate(p.series):
            cap = p.capacity[(s.pool, s.flavor, s.resource)]
            for var, old in ((self.n[i], s.old_nominal),
                             (self.b[i], s.old_borrowing),
                             (self.l[i], s.old_lending)):
                if var is self.b[i] and not s.shares_cohort:
                    continue
                if var is self.l[i] and not s.shares_cohort:
                    continue
                dev = m.new_int_var(0, 2 * cap + abs(old or 0), f"d{i}_{len(changes)}")
                if old is None:  # unset: unlimited borrowing = capacity − N, lending = N
                    target = (cap - self.n[i]) if var is self.b[i] else self.n[i]
                    m.add(dev >= var - target)
                    m.add(dev >= target - var)
                else:
                    m.add(dev >= var - old)
                    m.add(dev >= old - var)
                changes.append(dev)
        self.objectives = {
            "expected_unmet": sum(unmet_terms),
            "weighted_shortfall": worst,
            "quota_change": sum(changes),
        }

    def hint(self, s: QuotaSolution) -> None:
        self.m.clear_hints()
        for vars_, vals in ((self.n, s.nominal), (self.b, s.borrowing), (self.l, s.lending)):
            for var, val in zip(vars_, vals, strict=True):
                self.m.add_hint(var, val)

    def read(self, solver: cp_model.CpSolver) -> QuotaSolution:
        return QuotaSolution(
            nominal=[int(solver.value(v)) for v in self.n],
            borrowing=[int(solver.value(v)) for v in self.b],
            lending=[int(solver.value(v)) for v in self.l],
        )


def solve_quotas(p: QuotaProblem, time_limit_s: float, workers: int = 2) -> QuotaSolution:
    """The three stages within `time_limit_s` in total."""
    started = time.perf_counter()
    model = _Model(p)
    current: QuotaSolution | None = None
    stages: list[StageResult] = []
    for name in STAGES:
        remaining = time_limit_s - (time.perf_counter() - started)
        objective = model.objectives[name]
        if remaining <= 0.05 and current is not None:
            stages.append(StageResult(name=name, status="NOT_RUN", objective=float("nan"),
                                      bound=float("nan"), wall_s=0.0))
            continue
        if current is not None:
            model.hint(current)
        model.m.minimize(objective)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(remaining, 0.05)
        solver.parameters.num_workers = max(1, workers)
        t0 = time.perf_counter()
        status = solver.solve(model.m)
        elapsed = time.perf_counter() - t0
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if current is None:
                from core.errors import SolverError

                raise SolverError(f"quota model: no feasible quotas ({solver.status_name(status)}); "
                                  "check capacity against the guaranteed minimums")
            stages.append(StageResult(name=name, status=str(solver.status_name(status)),
                                      objective=float("nan"), bound=float("nan"), wall_s=elapsed))
            continue
        current = model.read(solver)
        value = round(solver.objective_value)
        stages.append(StageResult(name=name, status="OPTIMAL" if status == cp_model.OPTIMAL else "FEASIBLE",
                                  objective=value, bound=float(solver.best_objective_bound), wall_s=elapsed))
        model.m.add(objective <= value)
    assert current is not None
    current.stages = stages
    current.status = "OPTIMAL" if all(s.status == "OPTIMAL" for s in stages) else "FEASIBLE"
    current.wall_s = time.perf_counter() - started
    return current
