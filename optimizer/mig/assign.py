"""From move counts to physical GPUs: which GPU changes, to what, and each node's mig-parted entry.

1. Per group, pick the GPUs that change. With a per-node limit the solver already split each
   group's changes over node classes; inside a class the changes are dealt round-robin, each
   group continuing where the previous stopped, so node loads differ by at most one (never
   above K) and no node gives more GPUs of a group than it has. Without a limit, the least
   busy GPUs change (as the eviction count assumed), packed onto as few nodes as possible
   among equals (each touched node needs a drain).
2. Per model, hand the target shapes to the changed GPUs: a GPU whose current layout is among
   the targets keeps it (not a change after all); the rest are matched in (node, index) order
   so identical targets land side by side and nodes share mig-parted entries.
3. Unless `plans.spare_instances`, drop from the changed GPUs the instances nobody asked for
   (`trim_spare`): the count model fills a changed card to a count-maximal layout, which is
   what keeps it small and fast; trimming afterwards keeps its first three optima (see there).
4. Per node with a change: the full mig-parted entry (every GPU, grouped by configuration, in
   NVIDIA's field names), the `nvidia.com/mig.config` value (a content hash, so identical
   entries share one name), the GPUs changed and the pods to evict. Every MIG configuration
   is checked against `core.mig`'s placement rules before it is emitted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuledger.core.errors import PlanError
from gpuledger.core.mig import gpu_model
from gpuledger.optimizer.mig.inputs import Config, Demand, Fleet, Gpu
from gpuledger.optimizer.mig.model import CountProblem, CountSolution
from gpuledger.optimizer.plan.contract import (
    GpuChange,
    GpuConfig,
    MigPartedGroup,
    NodeMigChange,
    PodRef,
    state_hash,
)

GpuKey = tuple[str, int]
"""(node, GPU index)."""


@dataclass(frozen=True)
class Grouping:
    """Which physical GPUs form each count-model group and node class."""

    members: tuple[tuple[Gpu, ...], ...]
    class_nodes: tuple[tuple[str, ...], ...] = ()


def final_configs(
    fleet: Fleet, problem: CountProblem, grouping: Grouping, solution: CountSolution
) -> dict[GpuKey, Config]:
    """Steps 1-2: the configuration every GPU ends with."""
    changing = _pick_changing(problem, grouping, solution)
    final: dict[GpuKey, Config] = {(g.node, g.index): g.config for g in fleet.gpus}
    for model in sorted({g.model for g in changing}):
        gpus = sorted((g for g in changing if g.model == model), key=lambda g: (g.node, g.index))
        targets: Counter[Config] = Counter(
            {c: n for (m, c), n in solution.new.items() if m == model and n}
        )
        if sum(targets.values()) != len(gpus):
            raise PlanError(f"MIG plan for {model}: {len(gpus)} GPUs change but "
                            f"{sum(targets.values())} target layouts were chosen (solver bug)")
        rest = []
        for gpu in gpus:
            if targets[gpu.config] > 0:
                targets[gpu.config] -= 1  # already has it: not a change
            else:
                rest.append(gpu)
        ordered = sorted(targets.elements(), key=_config_order)
        for gpu, config in zip(rest, ordered, strict=True):
            final[(gpu.node, gpu.index)] = config
    return final


def trim_spare(fleet: Fleet, demand: Demand, final: Mapping[GpuKey, Config]) -> dict[GpuKey, Config]:
    """The final layouts with every instance nobody asked for removed from the GPUs that change.

    Per (model, profile) the changed GPUs keep at most what the unchanged GPUs leave unmet:
    `max(0, need − kept)`. Why this is still optimal for unmet demand, GPUs used and GPUs
    changed (with evictions): removing instances from a valid placement leaves a valid one;
    only surplus goes, so unmet demand stays; no GPU gains a change (one trimmed back to its
    old layout stops being one, evicting nothing); and any plan that creates only demanded
    instances can be filled up to count-maximal layouts without getting worse, so the filled
    model's optimum bounds the trimmed one. The slices freed stay free for the next plan
    instead of being held by instances no pod uses (decision 0109)."""
    out = dict(final)
    for model in sorted({g.model for g in fleet.gpus}):
        need = demand.for_model(model).profiles
        gpus = [g for g in fleet.gpus if g.model == model]
        changed = [g for g in gpus if final[(g.node, g.index)] != g.config]
        moved = {(g.node, g.index) for g in changed}
        kept: Counter[str] = Counter()
        created: Counter[str] = Counter()
        for g in gpus:
            key = (g.node, g.index)
            (created if key in moved else kept).update(dict(final[key] or ()))
        surplus = {p: min(n, n + kept[p] - need.get(p, 0)) for p, n in created.items()}
        for g in sorted(changed, key=lambda x: (x.node, x.index), reverse=True):
            if final[(g.node, g.index)] is None:
                continue  # a whole card: nothing to trim
            config = dict(final[(g.node, g.index)] or ())
            for p in sorted(config):
                drop = min(config[p], max(0, surplus[p]))
                config[p] -= drop
                surplus[p] -= drop
            out[(g.node, g.index)] = tuple(sorted((p, n) for p, n in config.items() if n))
    return out


def _config_order(config: Config) -> tuple[int, str]:
    return (1, "") if config is None else (0, repr(config))


def _pick_changing(
    problem: CountProblem, grouping: Grouping, solution: CountSolution
) -> list[Gpu]:
    picked: list[Gpu] = []
    if solution.flows:
        for c, cls in enumerate(problem.node_classes):
            nodes = grouping.class_nodes[c]
            pointer = 0
            for g, _ in cls.members:
                d = solution.flows.get((g, c), 0)
                base, extra = divmod(d, len(nodes))
                for k, node in enumerate(nodes):
                    take = base + (1 if (k - pointer) % len(nodes) < extra else 0)
                    here = sorted((x for x in grouping.members[g] if x.node == node), key=lambda x: x.index)
                    picked.extend(here[:take])
                pointer = (pointer + extra) % len(nodes)
        return picked
    touched: set[str] = set()
    for g, group in enumerate(problem.groups):
        need = group.size - solution.stay[g]
        if not need:
            continue
        # least busy first (what the eviction count assumed); among equals, nodes already
        # drained, then nodes with more of this group, so fewer nodes are touched
        per_node = Counter(gpu.node for gpu in grouping.members[g])
        order = sorted(grouping.members[g], key=lambda x: (
            len(x.busy), x.node not in touched, -per_node[x.node], x.node, x.index))
        for gpu in order[:need]:
            picked.append(gpu)
            touched.add(gpu.node)
    return picked


def gpu_config(config: Config) -> GpuConfig:
    return GpuConfig(mig_enabled=config is not None, mig_devices=dict(config or ()))


def node_changes(fleet: Fleet, final: Mapping[GpuKey, Config]) -> list[NodeMigChange]:
    """Step 3: one `NodeMigChange` per node where any GPU's configuration changes."""
    out = []
    for node in fleet.nodes:
        changed = [g for g in node.gpus if final[(node.name, g.index)] != g.config]
        if not changed:
            continue
        entry = mig_parted_entry(node.gpus, final, node.name)
        name = "gpuledger-" + state_hash([e.to_mig_parted() for e in entry])[:10]
        out.append(NodeMigChange(
            node=node.name, model=node.gpus[0].model, mig_config=name,
            previous_mig_config=node.mig_config, mig_parted=tuple(entry),
            gpus_changed=tuple(
                GpuChange(index=g.index, uuid=g.uuid, before=gpu_config(g.config),
                          after=gpu_config(final[(node.name, g.index)]))
                for g in changed
            ),
            pods_to_evict=tuple(
                PodRef(namespace=b.namespace, pod=b.pod, gpu_index=g.index, profile=b.profile,
                       evictable=b.evictable, serving=b.serving)
                for g in changed for b in g.busy
            ),
        ))
    return out


def mig_parted_entry(
    gpus: Sequence[Gpu], final: Mapping[GpuKey, Config], node: str
) -> list[MigPartedGroup]:
    by_config: dict[Config, list[int]] = defaultdict(list)
    for gpu in sorted(gpus, key=lambda g: g.index):
        config = final[(node, gpu.index)]
        if config:
            gpu_model(gpu.model).placement(config)  # the placement rules, or InputError
        by_config[config].append(gpu.index)
    groups = sorted(by_config.items(), key=lambda kv: kv[1][0])
    return [
        MigPartedGroup(devices=tuple(idx), mig_enabled=config is not None, mig_devices=dict(config or ()))
        for config, idx in groups
    ]
