"""MIG repartitioning: from a fleet and a demand to a frozen `Plan` of kind `mig`.

1. Check the demand against the fleet (every demanded model present; warn when the demand
   exceeds what the fleet can hold by slices).
2. Group identical GPUs (model, configuration, busy pods, may change) and, when the per-node
   limit can bind, group nodes of identical composition (`optimizer.mig.model`).
3. Solve the lexicographic count model with CP-SAT within the time limit.
4. Turn counts into per-GPU configurations and per-node mig-parted entries
   (`optimizer.mig.assign`); unless `plans.spare_instances`, changed GPUs keep only the
   instances demand asks for (a partial layout: mig-parted creates exactly the listed
   devices); every emitted layout is checked against the placement rules.
5. Measure the effect on the final configurations themselves (not on solver values), run the
   first-fit / first-fit-decreasing baselines on the same input and the slice lower bound.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.mig import COMPUTE_SLICES, gpu_model
from gpuledger.optimizer.mig.assign import Grouping, final_configs, node_changes, trim_spare
from gpuledger.optimizer.mig.baselines import first_fit, slice_lower_bound
from gpuledger.optimizer.mig.geometry import is_used, stranded_slices, target_shapes
from gpuledger.optimizer.mig.inputs import Config, Demand, Fleet, Gpu
from gpuledger.optimizer.mig.model import CountProblem, Group, NodeClass, solve_counts
from gpuledger.optimizer.plan.contract import (
    Baseline,
    Effect,
    MigChanges,
    ObservedObject,
    Plan,
    SolverInfo,
    fingerprint_of,
    new_plan_id,
    state_hash,
)
from gpuledger.optimizer.solver_status import check_change_limit, check_solver_limits

HOURS_PER_MONTH = 730.0
GpuKey = tuple[str, int]


@dataclass(frozen=True)
class MigOptions:
    time_limit_s: float = 30.0
    max_changes_per_node: int | None = None
    max_changes_per_plan: int | None = None
    workers: int = 2
    baselines: bool = True
    inputs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse limits no run can honour: a NaN or negative limit used to yield a 'plan'."""
        check_solver_limits(self.time_limit_s, self.workers)
        check_change_limit(self.max_changes_per_node, "max changes per node")
        check_change_limit(self.max_changes_per_plan, "max changes per plan")


def plan_mig(fleet: Fleet, demand: Demand, options: MigOptions, settings: Settings, now: datetime) -> Plan:
    """Compute a MIG plan (see the module docstring for the steps)."""
    # 1. Demand against fleet.
    demand = _restrict(demand, fleet)
    warnings = _check_demand(fleet, demand)
    planned = {d.model for d in demand.models}
    movable = {
        (g.node, g.index): node.in_maintenance_window and not g.pinned and g.model in planned
        for node in fleet.nodes for g in node.gpus
    }
    # 2. Groups and node classes.
    problem, grouping = build_problem(fleet, demand, movable, options)
    # 3. Solve.
    solution = solve_counts(problem, options.time_limit_s, options.workers)
    # 4. Physical assignment and entries.
    final = final_configs(fleet, problem, grouping, solution)
    if not settings.plans.spare_instances:
        final = trim_spare(fleet, demand, final)
    nodes = node_changes(fleet, final)
    # 5. Effect, baselines, fingerprint.
    before = measure(fleet, demand, {(g.node, g.index): g.config for g in fleet.gpus})
    after = measure(fleet, demand, final)
    lower = sum(slice_lower_bound(d) for d in demand.models)
    saving = sum(
        (before.used_by_model.get(m, 0) - after.used_by_model.get(m, 0))
        * _unit_price(settings, m, now) * HOURS_PER_MONTH
        for m in planned
    )
    effect = Effect(
        gpus_used_before=before.used, gpus_used_after=after.used, gpus_freed=before.used - after.used,
        gpus_changed=sum(len(n.gpus_changed) for n in nodes),
        pods_evicted=sum(len(n.pods_to_evict) for n in nodes),
        serving_pods_evicted=sum(p.serving for n in nodes for p in n.pods_to_evict),
        slices_stranded_before=before.stranded, slices_stranded_after=after.stranded,
        unmet_instances=after.unmet_instances, unmet_slices=after.unmet_slices,
        spare_instances=after.spare_instances, spare_slices=after.spare_slices, slice_lower_bound=lower,
        monthly_cost_saving=round(saving, 2), currency=settings.currency,
    )
    if after.unmet_instances:
        warnings.append(
            f"{after.unmet_instances} demanded instances ({after.unmet_slices} compute slices) "
            "cannot be placed under the constraints"
        )
    baselines = _baselines(fleet, demand, movable) if options.baselines else ()
    observed = observe(fleet)
    fingerprint = fingerprint_of(observed)
    changes = MigChanges(nodes=tuple(nodes))
    return Plan(
        id=new_plan_id("mig", now, fingerprint, state_hash(changes.model_dump(mode="json"))),
        kind="mig", created_at=now, fingerprint=fingerprint, observed=observed,
        inputs={"fleet": fleet.source, "demand": demand.source, **options.inputs},
        changes=changes, effect=effect,
        solver=SolverInfo(status=solution.status, wall_s=round(solution.wall_s, 3),
                          time_limit_s=options.time_limit_s, stages=tuple(solution.stages)),
        baselines=baselines, warnings=tuple(warnings),
    )


def _restrict(demand: Demand, fleet: Fleet) -> Demand:
    """The models to plan: for complete demand every model of the fleet (no demand = free its
    idle GPUs), otherwise only models with some demand (the others are left as they are)."""
    if demand.complete:
        return Demand(tuple(demand.for_model(m) for m in fleet.models()), demand.source, True)
    kept = tuple(d for d in demand.models if d.whole or any(d.profiles.values()))
    return Demand(kept, demand.source)


def _check_demand(fleet: Fleet, demand: Demand) -> list[str]:
    warnings = []
    sizes = Counter(g.model for g in fleet.gpus)
    for d in demand.models:
        if not sizes[d.model]:
            have = ", ".join(f"{m}: {n}" for m, n in sorted(sizes.items()))
            raise InputError(f"infeasible demand: it asks for {d.model} instances but the fleet has no "
                             f"{d.model} GPUs (fleet: {have})")
        need = slice_lower_bound(d)
        if need > sizes[d.model]:
            warnings.append(f"demand for {d.model} needs at least {need} GPUs by slices but the fleet "
                            f"has {sizes[d.model]}: some of it will stay unmet")
    return warnings


def build_problem(
    fleet: Fleet, demand: Demand, movable: Mapping[GpuKey, bool], options: MigOptions
) -> tuple[CountProblem, Grouping]:
    """Step 2: groups of identical GPUs and, when the per-node limit binds, node classes."""
    planned = {d.model for d in demand.models}
    k = options.max_changes_per_node
    per_node_movable = Counter(
        g.node for g in fleet.gpus if g.model in planned and movable[(g.node, g.index)]
    )
    binds = k is not None and any(n > k for n in per_node_movable.values())
    keyed: dict[tuple[str, Config, int, bool], list[Gpu]] = defaultdict(list)
    for g in fleet.gpus:
        if g.model in planned:
            keyed[(g.model, g.config, len(g.busy), movable[(g.node, g.index)])].append(g)
    keys = sorted(keyed, key=lambda k: (k[0], repr(k[1]), k[2], k[3]))
    members = tuple(tuple(sorted(keyed[k], key=lambda g: (g.node, g.index))) for k in keys)
    groups = tuple(
        Group(model=key[0], config=key[1], busy=key[2], movable=key[3], size=len(gpus))
        for key, gpus in zip(keys, members, strict=True)
    )
    targets = {
        d.model: (*target_shapes(d.model, frozenset(p for p, n in d.profiles.items() if n)), None)
        for d in demand.models
    }
    classes: list[NodeClass] = []
    class_nodes: list[tuple[str, ...]] = []
    index = {id_: i for i, group in enumerate(members) for id_ in (id(g) for g in group)}
    if binds:
        per_node: dict[str, Counter[int]] = defaultdict(Counter)
        for i, group in enumerate(members):
            if groups[i].movable:
                for g in group:
                    per_node[g.node][index[id(g)]] += 1
        by_comp: dict[tuple[tuple[int, int], ...], list[str]] = defaultdict(list)
        for node, comp in sorted(per_node.items()):
            by_comp[tuple(sorted(comp.items()))].append(node)
        for comp_key, nodes in sorted(by_comp.items()):
            classes.append(NodeClass(nodes=len(nodes), members=comp_key))
            class_nodes.append(tuple(nodes))
    problem = CountProblem(
        groups=groups, targets=targets, demand={d.model: d for d in demand.models},
        max_changes_per_plan=options.max_changes_per_plan,
        max_changes_per_node=k if binds else None, node_classes=tuple(classes),
    )
    return problem, Grouping(members=members, class_nodes=tuple(class_nodes))


@dataclass(frozen=True)
class Measure:
    used: int
    used_by_model: dict[str, int]
    stranded: int
    unmet_instances: int
    unmet_slices: int
    spare_instances: int = 0
    """MIG instances beyond what the demand asks for (a layout filled to its count-maximal shape)."""
    spare_slices: int = 0
    """Their compute slices: with `stranded`, the slices serving no demand, counted alike for the
    plan and the first-fit baselines (which create only what is asked for and strand the rest)."""


def measure(fleet: Fleet, demand: Demand, final: Mapping[GpuKey, Config]) -> Measure:
    """GPUs in use, stranded slices and unmet demand of a set of final configurations."""
    used_by_model: Counter[str] = Counter()
    stranded = unmet_instances = unmet_slices = spare = spare_slices = 0
    by_model: dict[str, list[Config]] = defaultdict(list)
    for g in fleet.gpus:
        by_model[g.model].append(final[(g.node, g.index)])
    for model, configs in by_model.items():
        d = demand.for_model(model)
        supply: Counter[str] = Counter()
        for c in configs:
            supply.update(dict(c or ()))
        whole = sum(c is None for c in configs)
        used_by_model[model] = sum(is_used(c) for c in configs) + min(d.whole, whole)
        stranded += sum(stranded_slices(model, c) for c in configs)
        missing = {p: max(0, n - supply[p]) for p, n in d.profiles.items()}
        surplus = {p: max(0, n - d.profiles.get(p, 0)) for p, n in supply.items()}
        spare += sum(surplus.values())
        missing_whole = max(0, d.whole - whole)
        unmet_instances += sum(missing.values()) + missing_whole
        profiles = gpu_model(model).profiles
        spare_slices += sum(profiles[p].compute * n for p, n in surplus.items())
        unmet_slices += sum(profiles[p].compute * n for p, n in missing.items())
        unmet_slices += COMPUTE_SLICES * missing_whole
    return Measure(sum(used_by_model.values()), dict(used_by_model), stranded, unmet_instances, unmet_slices,
                   spare, spare_slices)


def _baselines(fleet: Fleet, demand: Demand, movable: Mapping[GpuKey, bool]) -> tuple[Baseline, ...]:
    out = []
    current = {(g.node, g.index): g.config for g in fleet.gpus}
    for name, decreasing in (("first-fit", False), ("first-fit-decreasing", True)):
        packed = first_fit(fleet, demand, movable, decreasing=decreasing)
        m = measure(fleet, demand, packed.final)
        out.append(Baseline(name=name, figures={
            "gpus_used_after": m.used,
            "gpus_changed": sum(packed.final[k] != current[k] for k in current),
            "slices_stranded_after": m.stranded,
            "unmet_instances": m.unmet_instances,
            "unmet_slices": m.unmet_slices,
            "spare_instances": m.spare_instances,
            "spare_slices": m.spare_slices,
        }, note="packs from empty GPUs; arrival order is a seeded shuffle" if not decreasing
            else "packs from empty GPUs; largest instances first"))
    return tuple(out)


def observe(fleet: Fleet) -> tuple[ObservedObject, ...]:
    """Per node: the `nvidia.com/mig.config` label (what the actuator can check on the API
    server); plus one `Fleet` object hashing every GPU's layout and busy pods."""
    nodes = tuple(
        ObservedObject(kind="Node", name=n.name, resource_version=n.resource_version,
                       state=state_hash({"mig.config": n.mig_config}))
        for n in fleet.nodes
    )
    inventory = [
        (g.node, g.index, g.model, g.config, sorted((b.namespace, b.pod, b.profile or "") for b in g.busy))
        for g in fleet.gpus
    ]
    return (*nodes, ObservedObject(kind="Fleet", name="inventory", state=state_hash(inventory)))


def _unit_price(settings: Settings, model: str, now: datetime) -> float:
    entries = [p for p in settings.price_book if p.model == model and p.effective_from <= now.date()]
    if not entries:
        return 0.0
    return max(entries, key=lambda p: p.effective_from).unit_price

