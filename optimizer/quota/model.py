"""The quota model: nominal quota, and with it borrowing and lending limits, per (queue, flavor,
resource).

Variables (integers, in resource units): N nominal per series, and R reserved (the part never
lent, N − lending limit) for the GPU series of teams with a guaranteed minimum.
Constraints:
- per pool (cohort, flavor, resource): sum of N ≤ capacity;
- per series: N ≥ its floor (the queue's guarantee from its own demand);
- R ≤ N; per team with a guaranteed minimum: sum of R over its `nvidia.com/gpu` series ≥ the
  minimum (queues without a cohort lend nothing, so there R is N itself).

Objective, lexicographic (stages, each keeping the previous optimum as a constraint):
1. expected unmet demand E[(D − N)⁺] × horizon hours over the forecast scenarios (demand above
   nominal has to borrow, and waits when the cohort is full). It is convex piecewise-linear in
   an integer N, so it is the maximum of its tangent lines at the kinks: exact, with a strong LP
   relaxation. The scenarios (every horizon hour at every quantile level) are summarized by
   `POINTS` equally likely quantiles, which bounds the kinks per series;
2. fairness, DRF-style with Kueue's weights: the largest weighted dominant shortfall,
   max over series of E[(D − N)⁺] / (capacity × weight);
3. stability: total |change| of nominal quotas, lending and borrowing limits.

Borrowing and lending limits have closed forms given N, which is why they are not variables:
- borrowing limit B: demand above N + B can never run, so N + B must reach the forecast peak
  P (capped by capacity), and B ≤ capacity − N is all that can ever be borrowed; the limit
  closest to the current one is clip(current, P − N, capacity − N), and an unset limit
  (unlimited) already satisfies both, so it stays unset. Its change enters stage 3 exactly as
  max(0, P − N − current) + max(0, current − capacity + N);
- lending limit L: N − R for teams with a guaranteed minimum; otherwise the current limit
  clipped to N (Kueue requires L ≤ N), or unset. Its change enters stage 3 as |N − R − current|
  and max(0, current − N) respectively.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuledger.core.errors import SolverError
from gpuledger.optimizer.plan.contract import StageResult
from gpuledger.optimizer.quota.cp_sat import cp_model
from gpuledger.optimizer.solver_status import require_reached

SCALE = 100
"""Expected unmet is in resource-hours × SCALE (integers for CP-SAT)."""
SHARE_SCALE = 10_000


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
    floor: int = 0  # the least nominal quota the plan may give (`optimizer.quota.guarantees`)


@dataclass(frozen=True)
class QuotaProblem:
    series: tuple[SeriesSpec, ...]
    capacity: Mapping[tuple[str, str, str], int]
    guaranteed: Mapping[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    """team → (GPUs, indices of its `nvidia.com/gpu` series)."""


@dataclass
class QuotaSolution:
    nominal: list[int]
    reserved: dict[int, int] = field(default_factory=dict)
    stages: list[StageResult] = field(default_factory=list)
    status: str = "OPTIMAL"
    wall_s: float = 0.0


STAGES = ("expected_unmet", "weighted_shortfall", "quota_change")
POINTS = 48


def summarize(scenarios: np.ndarray, points: int = POINTS) -> np.ndarray:
    """`points` equally likely values standing for the scenario distribution (mid-quantiles)."""
    values = np.asarray(scenarios, dtype=float)
    if values.size <= points:
        return values
    return np.quantile(values, (np.arange(points) + 0.5) / points)


def shortfall_table(points: np.ndarray, hours: float, top: int) -> list[int]:
    """E[(D − n)⁺] × hours × SCALE for n = 0..top, rounded up, made convex again."""
    values = np.asarray(points, dtype=float)
    if values.size == 0:
        return [0] * (top + 1)
    n = np.arange(top + 1, dtype=float)[:, None]
    mean = np.maximum(values[None, :] - n, 0.0).mean(axis=1)
    table = np.ceil(mean * hours * SCALE - 1e-9).astype(np.int64)
    slopes = np.maximum.accumulate(np.diff(table)) if top else np.zeros(0, dtype=np.int64)
    return [int(v) for v in np.concatenate([[table[0]], table[0] + np.cumsum(slopes)])]


def _tangents(table: Sequence[int]) -> list[tuple[int, int, int]]:
    """(k, f(k), slope to k+1) at every kink of a convex table."""
    out = []
    prev_slope = None
    for k in range(len(table) - 1):
        slope = table[k + 1] - table[k]
        if slope != prev_slope:
            out.append((k, table[k], slope))
            prev_slope = slope
    return out or [(0, table[0], 0)]


def peak(points: np.ndarray, cap: int) -> int:
    """The forecast peak a borrowing limit must let the queue reach, capped by capacity."""
    return min(cap, math.ceil(float(points.max()) - 1e-9)) if points.size else 0


@dataclass(frozen=True)
class StageOne:
    """Stage 1 solved exactly by marginal analysis, as the set of its optimal solutions.

    Expected unmet is separable and convex per series, with one capacity constraint per pool,
    so its optima are: take the `capacity` largest marginal gains of the pool. With λ the
    smallest gain taken (0 when capacity is left over), every optimum has
    lo ≤ N ≤ hi per series (lo = gains above λ, hi = gains at least λ), and the pool's sum is
    exactly its capacity when λ > 0; inside those bounds a series' shortfall is linear,
    F(lo) − λ·(N − lo).
    """

    lo: tuple[int, ...]
    hi: tuple[int, ...]
    base: tuple[int, ...]
    lam: dict[tuple[str, str, str], int]
    value: int


def stage_one(p: QuotaProblem, tables: Sequence[Sequence[int]]) -> StageOne:
    lo = [0] * len(p.series)
    hi = [0] * len(p.series)
    lam: dict[tuple[str, str, str], int] = {}
    for key, idx in _pools(p).items():
        floors = [p.series[i].floor for i in idx]
        cap = p.capacity[key] - sum(floors)  # floors are given first; the rest is shared by gain
        gains = [np.diff(-np.asarray(tables[i], dtype=np.int64))[p.series[i].floor:] for i in idx]
        positive = sum(int((g > 0).sum()) for g in gains)
        if positive <= cap:
            lam[key] = 0
            for i, g, f in zip(idx, gains, floors, strict=True):
                lo[i], hi[i] = f + int((g > 0).sum()), f + cap
            continue
        pooled = np.concatenate(gains)  # floors may take it all: then no gain is taken
        level = int(np.partition(pooled, pooled.size - cap)[pooled.size - cap] if cap else pooled.max() + 1)
        lam[key] = level
        for i, g, f in zip(idx, gains, floors, strict=True):
            lo[i], hi[i] = f + int((g > level).sum()), f + int((g >= level).sum())
    base = [int(tables[i][lo[i]]) for i in range(len(p.series))]
    value = sum(base) - sum(
        lam[key] * (p.capacity[key] - sum(lo[i] for i in idx)) for key, idx in _pools(p).items() if lam[key]
    )
    return StageOne(tuple(lo), tuple(hi), tuple(base), lam, value)


def _cap(p: QuotaProblem, s: SeriesSpec) -> int:
    return p.capacity[(s.pool, s.flavor, s.resource)]


def _pools(p: QuotaProblem) -> dict[tuple[str, str, str], list[int]]:
    pools: dict[tuple[str, str, str], list[int]] = {}
    for i, s in enumerate(p.series):
        pools.setdefault((s.pool, s.flavor, s.resource), []).append(i)
    return pools


class _Model:
    """Variables, constraints and stage objectives. With `reduced`, N is confined to the stage-1
    optima (`StageOne`), so stage 1 is already done and shortfalls are linear; without it, the
    full model expresses each shortfall by its tangent lines."""

    def __init__(self, p: QuotaProblem, tables: Sequence[Sequence[int]], peaks: Sequence[int],
                 reduced: StageOne | None) -> None:
        """Stages 1-3 in a fixed order: variables are created in the same sequence every time,
        so CP-SAT sees the same model (and finds the same plan)."""
        self.p = p
        self.m = cp_model.CpModel()
        self.n: list[cp_model.IntVar] = []
        self.peaks = list(peaks)
        short = self._nominal(tables, reduced)
        self.r: dict[int, cp_model.IntVar] = self._reserved()
        self.objectives = {
            "expected_unmet": sum(short),
            "weighted_shortfall": self._worst(tables, short),
            "quota_change": sum(self._changes()),
        }

    def _nominal(self, tables: Sequence[Sequence[int]], reduced: StageOne | None) -> list[Any]:
        """Stage 1: a nominal quota N and its expected shortfall per series; pool capacities."""
        p, m = self.p, self.m
        short: list[Any] = []
        for i, s in enumerate(p.series):
            cap = p.capacity[(s.pool, s.flavor, s.resource)]
            table = tables[i]
            if reduced is not None:
                n = m.new_int_var(reduced.lo[i], reduced.hi[i], f"n{i}")
                lam = reduced.lam[(s.pool, s.flavor, s.resource)]
                short.append(reduced.base[i] - lam * (n - reduced.lo[i]))
            else:
                n = m.new_int_var(min(s.floor, cap), cap, f"n{i}")
                u = m.new_int_var(0, table[0], f"u{i}")
                for k, fk, slope in _tangents(table):
                    m.add(u >= fk + slope * (n - k))
                short.append(u)
            self.n.append(n)
        for key, idx in _pools(p).items():
            total = sum(self.n[i] for i in idx)
            if reduced is not None and reduced.lam[key]:
                m.add(total == p.capacity[key])
            else:
                m.add(total <= p.capacity[key])
        return short

    def _reserved(self) -> dict[int, cp_model.IntVar]:
        """Reserved (never lent) quota of teams with a guaranteed minimum."""
        p, m = self.p, self.m
        reserved: dict[int, cp_model.IntVar] = {}
        for gpus, members in p.guaranteed.values():
            terms = []
            for i in members:
                if not p.series[i].shares_cohort:
                    terms.append(self.n[i])
                    continue
                if i not in reserved:
                    cap = p.capacity[(p.series[i].pool, p.series[i].flavor, p.series[i].resource)]
                    reserved[i] = m.new_int_var(0, cap, f"r{i}")
                    m.add(reserved[i] <= self.n[i])
                terms.append(reserved[i])
            m.add(sum(terms) >= gpus)
        return reserved

    def _worst(self, tables: Sequence[Sequence[int]], short: list[Any]) -> cp_model.IntVar:
        """Stage 2: the largest weighted dominant shortfall."""
        top = max((t[0] for t in tables), default=0)
        worst = self.m.new_int_var(0, max(1, top) * SHARE_SCALE, "worst")
        for i, s in enumerate(self.p.series):
            cap = max(1, self.p.capacity[(s.pool, s.flavor, s.resource)])
            factor = max(1, round(SHARE_SCALE / (cap * max(s.weight, 1e-3))))
            self.m.add(worst >= factor * short[i])
        return worst

    def _changes(self) -> list[Any]:
        """Stage 3: the change of every nominal quota, borrowing and lending limit."""
        m = self.m
        changes: list[Any] = []
        for i, s in enumerate(self.p.series):
            cap = self.p.capacity[(s.pool, s.flavor, s.resource)]
            n = self.n[i]
            changes.append(_abs(m, n - s.old_nominal, 2 * cap + s.old_nominal, f"dn{i}"))
            if not s.shares_cohort:
                continue
            if s.old_borrowing is not None:
                d = m.new_int_var(0, 2 * cap + s.old_borrowing, f"db{i}")
                m.add(d >= self.peaks[i] - n - s.old_borrowing)
                m.add(d >= n + s.old_borrowing - cap)
                changes.append(d)
            if i in self.r:
                old_lending = n if s.old_lending is None else s.old_lending  # unset: lends all
                changes.append(_abs(m, n - self.r[i] - old_lending, 3 * cap + (s.old_lending or 0), f"dl{i}"))
            elif s.old_lending is not None:
                d = m.new_int_var(0, s.old_lending, f"dl{i}")
                m.add(d >= s.old_lending - n)
                changes.append(d)
        return changes

    def hint(self, s: QuotaSolution) -> None:
        self.m.clear_hints()
        for var, val in zip(self.n, s.nominal, strict=True):
            self.m.add_hint(var, val)
        for i, var in self.r.items():
            self.m.add_hint(var, s.reserved.get(i, 0))

    def read(self, solver: cp_model.CpSolver) -> QuotaSolution:
        return QuotaSolution(
            nominal=[int(solver.value(v)) for v in self.n],
            reserved={i: int(solver.value(v)) for i, v in self.r.items()},
        )


def _abs(m: cp_model.CpModel, expr: Any, bound: int, name: str) -> cp_model.IntVar:
    d = m.new_int_var(0, bound, name)
    m.add(d >= expr)
    m.add(d >= -expr)
    return d


def limits(p: QuotaProblem, s: QuotaSolution) -> list[tuple[int | None, int | None]]:
    """(borrowing limit, lending limit) per series from the closed forms in the docstring."""
    out: list[tuple[int | None, int | None]] = []
    for i, spec in enumerate(p.series):
        if not spec.shares_cohort:
            out.append((None, None))
            continue
        cap, n = _cap(p, spec), s.nominal[i]
        top = peak(summarize(spec.scenarios), cap)
        borrowing = None if spec.old_borrowing is None else min(max(spec.old_borrowing, top - n), cap - n)
        if i in s.reserved:
            lent = n - s.reserved[i]
            lending = None if spec.old_lending is None and lent == n else lent
        else:
            lending = None if spec.old_lending is None else min(spec.old_lending, n)
        out.append((borrowing, lending))
    return out


def solve_quotas(p: QuotaProblem, time_limit_s: float, workers: int = 2, *,
                 reduce: bool = True) -> QuotaSolution:
    """The three stages within `time_limit_s` in total.

    1. Tables and peaks per series; stage 1 by marginal analysis (`StageOne`).
    2. The reduced model (N within the stage-1 optima) for stages 2 and 3. If the guaranteed
       minimums cannot be met inside the stage-1 optima, or `reduce` is False, the full model
       solves all three stages instead.
    """
    started = time.perf_counter()
    points = [summarize(s.scenarios) for s in p.series]
    tables = [shortfall_table(pt, s.hours, p.capacity[(s.pool, s.flavor, s.resource)])
              for pt, s in zip(points, p.series, strict=True)]
    peaks = [peak(pt, _cap(p, s)) for pt, s in zip(points, p.series, strict=True)]
    if reduce:
        one = stage_one(p, tables)
        model = _Model(p, tables, peaks, one)
        first = StageResult(name="expected_unmet", status="OPTIMAL", objective=one.value, bound=one.value,
                            wall_s=time.perf_counter() - started)
        result = _run_stages(model, STAGES[1:], time_limit_s - (time.perf_counter() - started), workers,
                             start=QuotaSolution(nominal=list(one.lo)))
        if result is not None:
            result.stages.insert(0, first)
            return _finish(result, started)
    model = _Model(p, tables, peaks, None)
    start = QuotaSolution(nominal=[max(s.floor, min(s.old_nominal, _cap(p, s)))
                                   for s in p.series])
    result = _run_stages(model, STAGES, time_limit_s - (time.perf_counter() - started), workers, start=start)
    if result is None:
        raise SolverError("quota model: no feasible quotas within the time limit; check capacity "
                          "against the guaranteed minimums")
    return _finish(result, started)


def _finish(result: QuotaSolution, started: float) -> QuotaSolution:
    result.status = "OPTIMAL" if all(s.status == "OPTIMAL" for s in result.stages) else "FEASIBLE"
    result.wall_s = time.perf_counter() - started
    return result


def _run_stages(model: _Model, stages: Sequence[str], budget: float, workers: int,
                start: QuotaSolution) -> QuotaSolution | None:
    """Each stage minimizes its objective, then keeps it as a bound; None when the first stage
    finds nothing feasible (the reduced model with unmeetable guarantees); a later stage that
    finds no solution fails the run (`optimizer.solver_status`)."""
    began = time.perf_counter()
    current: QuotaSolution | None = None
    results: list[StageResult] = []
    model.hint(start)
    for name in stages:
        remaining = budget - (time.perf_counter() - began)
        objective = model.objectives[name]
        if remaining <= 0.05 and current is not None:
            require_reached("quota", name, "NOT_RUN", budget)
        model.m.minimize(objective)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(remaining, 0.05)
        solver.parameters.num_workers = max(1, workers)
        t0 = time.perf_counter()
        status = solver.solve(model.m)
        elapsed = time.perf_counter() - t0
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if current is None:
                return None
            require_reached("quota", name, str(solver.status_name(status)), budget)
        current = model.read(solver)
        value = round(solver.objective_value)
        results.append(StageResult(name=name, status="OPTIMAL" if status == cp_model.OPTIMAL else "FEASIBLE",
                                   objective=value, bound=float(solver.best_objective_bound), wall_s=elapsed))
        model.m.add(objective <= value)
        model.hint(current)
    if current is None:
        return None
    current.stages = results
    return current
