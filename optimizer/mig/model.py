"""The MIG repartitioning model: integer move counts between groups of identical GPUs.

GPUs that share (model, current configuration, number of busy pods, whether they may change)
are interchangeable, so the model has one integer per group (how many stay as they are) and one
per (model, target shape) (how many changed GPUs take it): the size depends on the number of
distinct configurations, not on the number of GPUs, which is what lets 10,000 GPUs solve
exactly. (Merging groups across busy counts, with evictions as a convex function, was tried:
fewer variables, but CP-SAT proved stage 3 several times slower.) Which physical GPU moves
is decided afterwards (`optimizer.mig.assign`).

Constraints:
- GPUs that may not change (non-evictable pods, node outside its maintenance window) stay;
- changed GPUs of a model are distributed over that model's target shapes;
- at most K GPUs change per plan; at most K per node, modelled exactly with flows between
  groups and *node classes* (nodes with the same composition), only when K can bind;
- supply of each profile = instances on staying GPUs + instances on changed GPUs.

Objective, lexicographic, solved in four stages (each stage keeps the previous optima as
constraints and starts from the previous solution, so it is feasible at once):
1. unmet demand, in compute slices (a missing whole card counts 7);
2. GPUs in use (MIG cards with instances + whole cards serving whole-card demand);
3. GPUs changed, ties broken by pods evicted: changed·(E+1) + evicted, where E is the most
   pods that could ever be evicted, so one more change always costs more than any eviction
   saving (the weights provably keep the order; one stage instead of two proved faster on
   large fleets);
4. stranded compute slices on GPUs in use.
A stage stopped by the time limit with a solution keeps its best value as a bound and reports
FEASIBLE; a stage without one (infeasible, out of time, not run) fails the run
(`optimizer.solver_status`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from gpuledger.core.mig import COMPUTE_SLICES, gpu_model
from gpuledger.optimizer.mig.geometry import count, is_used, stranded_slices
from gpuledger.optimizer.mig.inputs import Config, ModelDemand
from gpuledger.optimizer.plan.contract import StageResult
from gpuledger.optimizer.solver_status import require_reached


@dataclass(frozen=True, slots=True)
class Group:
    model: str
    config: Config
    busy: int
    """Pods on each member GPU (changing one evicts them)."""
    movable: bool
    size: int


@dataclass(frozen=True, slots=True)
class NodeClass:
    """Nodes with identical composition: `members[g]` GPUs of group g on each of `nodes` nodes."""

    nodes: int
    members: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class CountProblem:
    groups: tuple[Group, ...]
    targets: Mapping[str, tuple[Config, ...]]
    demand: Mapping[str, ModelDemand]
    max_changes_per_plan: int | None = None
    max_changes_per_node: int | None = None
    node_classes: tuple[NodeClass, ...] = ()


@dataclass
class CountSolution:
    stay: list[int]
    new: dict[tuple[str, Config], int]
    flows: dict[tuple[int, int], int] = field(default_factory=dict)
    stages: list[StageResult] = field(default_factory=list)
    status: str = "OPTIMAL"
    wall_s: float = 0.0


STAGES: tuple[str, ...] = ("unmet_slices", "gpus_used", "gpus_changed", "slices_stranded")


class _Model:
    """The CP-SAT variables and the four stage objectives as linear expressions."""

    def __init__(self, p: CountProblem) -> None:
        self.p = p
        m = self.m = cp_model.CpModel()
        # 1. Variables: stays per group, new shapes per model, flows per (group, node class).
        self.stay = [
            m.new_int_var(0 if g.movable else g.size, g.size, f"stay{i}") for i, g in enumerate(p.groups)
        ]
        self.new: dict[tuple[str, Config], cp_model.IntVar] = {}
        for model, targets in p.targets.items():
            for t, config in enumerate(targets):
                self.new[(model, config)] = m.new_int_var(0, self._model_size(model), f"new_{model}_{t}")
        # 2. Changed GPUs of a model take the model's target shapes.
        for model in p.targets:
            changed = sum(g.size - self.stay[i] for i, g in enumerate(p.groups) if g.model == model)
            m.add(sum(v for (mm, _), v in self.new.items() if mm == model) == changed)
        changes = sum(g.size - self.stay[i] for i, g in enumerate(p.groups))
        if p.max_changes_per_plan is not None:
            m.add(changes <= p.max_changes_per_plan)
        self.flows = self._node_flows()
        # 3. Supply and unmet demand per (model, profile); whole cards exactly: max(0, W - whole).
        unmet_terms = []
        used_terms = []
        self.unmet_whole: dict[str, cp_model.IntVar] = {}
        for model, demand in p.demand.items():
            groups = [(i, g) for i, g in enumerate(p.groups) if g.model == model]
            for profile, need in demand.profiles.items():
                supply = sum(count(g.config, profile) * self.stay[i] for i, g in groups) + sum(
                    count(c, profile) * v for (mm, c), v in self.new.items() if mm == model
                )
                u = m.new_int_var(0, need, f"unmet_{model}_{profile}")
                m.add(u >= need - supply)
                unmet_terms.append(gpu_model(model).profiles[profile].compute * u)
            whole = sum(self.stay[i] for i, g in groups if g.config is None) + (
                self.new.get((model, None), 0)
            )
            uw = m.new_int_var(0, demand.whole, f"unmet_{model}_whole")
            diff = m.new_int_var(-self._model_size(model), demand.whole, f"wdiff_{model}")
            m.add(diff == demand.whole - whole)
            m.add_max_equality(uw, [diff, 0])
            self.unmet_whole[model] = uw
            unmet_terms.append(COMPUTE_SLICES * uw)
            used_terms.append(demand.whole - uw)
        # 4. The stage objectives.
        used_terms += [self.stay[i] for i, g in enumerate(p.groups) if is_used(g.config)]
        used_terms += [v for (_, c), v in self.new.items() if is_used(c)]
        evicted = sum(g.busy * (g.size - self.stay[i]) for i, g in enumerate(p.groups))
        stranded = sum(
            stranded_slices(g.model, g.config) * self.stay[i] for i, g in enumerate(p.groups)
        ) + sum(stranded_slices(mm, c) * v for (mm, c), v in self.new.items())
        self.objectives = {
            "unmet_slices": sum(unmet_terms),
            "gpus_used": sum(used_terms),
            "gpus_changed": changes * (sum(g.busy * g.size for g in p.groups) + 1) + evicted,
            "slices_stranded": stranded,
        }

    def hint(self, s: CountSolution) -> None:
        self.m.clear_hints()
        for var, value in zip(self.stay, s.stay, strict=True):
            self.m.add_hint(var, value)
        for key, var in self.new.items():
            self.m.add_hint(var, s.new[key])
        for fkey, fvar in self.flows.items():
            self.m.add_hint(fvar, s.flows[fkey])

    def read(self, solver: cp_model.CpSolver) -> CountSolution:
        return CountSolution(
            stay=[int(solver.value(v)) for v in self.stay],
            new={k: int(solver.value(v)) for k, v in self.new.items()},
            flows={k: int(solver.value(v)) for k, v in self.flows.items()},
        )

    def _model_size(self, model: str) -> int:
        return sum(g.size for g in self.p.groups if g.model == model)

    def _node_flows(self) -> dict[tuple[int, int], cp_model.IntVar]:
        """Changes of group g on nodes of class c; per class at most K per node."""
        p, m = self.p, self.m
        flows: dict[tuple[int, int], cp_model.IntVar] = {}
        if p.max_changes_per_node is None or not p.node_classes:
            return flows
        for c, cls in enumerate(p.node_classes):
            for g, per_node in cls.members:
                flows[(g, c)] = m.new_int_var(0, per_node * cls.nodes, f"flow{g}_{c}")
            m.add(sum(flows[(g, c)] for g, _ in cls.members) <= p.max_changes_per_node * cls.nodes)
        for g, group in enumerate(p.groups):
            incoming = [v for (gg, _), v in flows.items() if gg == g]
            if group.movable:
                m.add(sum(incoming) == group.size - self.stay[g])
        return flows


def solve_counts(p: CountProblem, time_limit_s: float, workers: int = 2) -> CountSolution:
    """Solve the four stages within `time_limit_s` in total (see the module docstring)."""
    started = time.perf_counter()
    model = _Model(p)
    # Start from "nothing changes": always feasible, so every stage has a solution at once.
    current = CountSolution(
        stay=[g.size for g in p.groups],
        new={k: 0 for k in model.new},
        flows={k: 0 for k in model.flows},
    )
    stages: list[StageResult] = []
    for name in STAGES:
        remaining = time_limit_s - (time.perf_counter() - started)
        objective = model.objectives[name]
        if remaining <= 0.05:
            require_reached("MIG", name, "NOT_RUN", time_limit_s)
        model.hint(current)
        model.m.minimize(objective)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = remaining
        solver.parameters.num_workers = max(1, workers)
        t0 = time.perf_counter()
        status = solver.solve(model.m)
        elapsed = time.perf_counter() - t0
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            current = model.read(solver)
            value = round(solver.objective_value)
            bound = float(solver.best_objective_bound)
            label = "OPTIMAL" if status == cp_model.OPTIMAL else "FEASIBLE"
        else:  # infeasible, invalid or out of time: no plan (optimizer.solver_status)
            require_reached("MIG", name, str(solver.status_name(status)), time_limit_s)
        stages.append(StageResult(name=name, status=label, objective=value, bound=bound, wall_s=elapsed))
        model.m.add(objective <= value)
    current.stages = stages
    current.status = "OPTIMAL" if all(s.status == "OPTIMAL" for s in stages) else "FEASIBLE"
    current.wall_s = time.perf_counter() - started
    return current


def evaluate(p: CountProblem, s: CountSolution) -> dict[str, int]:
    """The four stage objectives of a count solution, computed directly (no solver)."""
    from gpuledger.core.mig import gpu_model

    unmet = used = stranded = 0
    for model, demand in p.demand.items():
        groups = [(i, g) for i, g in enumerate(p.groups) if g.model == model]
        news = [(c, n) for (mm, c), n in s.new.items() if mm == model]
        for profile, need in demand.profiles.items():
            supply = sum(count(g.config, profile) * s.stay[i] for i, g in groups)
            supply += sum(count(c, profile) * n for c, n in news)
            unmet += gpu_model(model).profiles[profile].compute * max(0, need - supply)
        whole = sum(s.stay[i] for i, g in groups if g.config is None)
        whole += sum(n for c, n in news if c is None)
        unmet += COMPUTE_SLICES * max(0, demand.whole - whole)
        used += min(demand.whole, whole)
    used += sum(s.stay[i] for i, g in enumerate(p.groups) if is_used(g.config))
    used += sum(n for (_, c), n in s.new.items() if is_used(c))
    stranded += sum(stranded_slices(g.model, g.config) * s.stay[i] for i, g in enumerate(p.groups))
    stranded += sum(stranded_slices(mm, c) * n for (mm, c), n in s.new.items())
    changes = sum(g.size - s.stay[i] for i, g in enumerate(p.groups))
    evicted = sum(g.busy * (g.size - s.stay[i]) for i, g in enumerate(p.groups))
    weight = sum(g.busy * g.size for g in p.groups) + 1
    return {
        "unmet_slices": unmet, "gpus_used": used, "gpus_changed": changes * weight + evicted,
        "slices_stranded": stranded, "changes": changes, "evicted": evicted,
    }
