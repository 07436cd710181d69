"""Capacity now, by shape: what a workload could get right now, per cluster, pool and GPU model.

Why: the person waiting for a GPU asks "where does a 3g.40gb fit now", not "how many slices are
free". Every shape a workload can ask for is answered the way the scheduler would answer it:

1. **Node resources** (whole GPUs, MIG instances of the mixed strategy, time-slice replicas,
   HAMi `nvidia.com/gpumem`/`gpucores`): free = the node's `status.allocatable` minus the
   requests of the pods running there, which is kube-scheduler's own `NodeResourcesFit` sum.
   A time-sliced node's `nvidia.com/gpu` are replicas, a HAMi node's are vGPU slots
   (`deviceSplitCount` per card), so their shapes say so.
2. **MIG profiles that can still be placed**: for every MIG card, each profile of its model that
   fits beside the instances the card has now (`core.mig.GpuModel.placeable`, the one home of
   the placement rules). This needs a layout change (MIG Manager) but no running instance is
   touched. The warehouse does not record start slices (docs/decisions/0200), so the check is
   on the card's instance counts: "some valid placement of these instances plus one more".
3. **Devices the node resources do not show**: DRA devices published in ResourceSlices that no
   allocated claim holds (a whole card only when none of its devices is claimed; on-demand MIG
   devices of a dynamic card are possibilities, not devices, and are left out), and HAMi's
   memory and cores left on each card (card memory minus the allocations alive at the newest
   observation; summed over cards, while one pod takes its share from one card).

A row per (cluster, pool, model, shape): `ready` (schedulable now), `placeable` (cards where the
profile can be added by a layout change), `nodes` (where, sorted).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuledger.core.errors import InputError
from gpuledger.core.mig import gpu_model

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_RESOURCES = ("nvidia.com/gpumem", "nvidia.com/gpucores")


@dataclass(frozen=True, slots=True)
class NodeState:
    """One GPU node now: what it advertises and what its running pods request."""

    cluster: str
    node: str
    pool: str | None
    model: str | None
    sharing_mode: str
    allocatable: Mapping[str, float]
    requested: Mapping[str, float] = field(default_factory=dict)

    def free(self) -> dict[str, float]:
        """Step 1 per resource: allocatable minus the running pods' requests (may be <= 0)."""
        return {r: float(v) - float(self.requested.get(r, 0.0)) for r, v in self.allocatable.items()}


@dataclass(frozen=True, slots=True)
class CardState:
    """One MIG card now: its instances by profile, and how many of each a pod holds."""

    cluster: str
    node: str
    pool: str | None
    model: str
    uuid: str
    instances: Mapping[str, int]
    held: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceFree:
    """Free devices or amounts the node resources do not show (step 3): DRA devices published
    and not allocated (`dra gpu`, `dra mig-3g.40gb`), HAMi memory and cores left on a card
    (`hami gpumem MiB`, `hami gpucores %`: HAMi advertises neither as a node resource)."""

    cluster: str
    node: str
    pool: str | None
    model: str | None
    shape: str
    free: float


@dataclass(frozen=True, slots=True)
class ShapeFree:
    """What is free of one shape in one (cluster, pool, model)."""

    cluster: str
    pool: str | None
    model: str | None
    shape: str
    ready: float
    placeable: int
    nodes: tuple[str, ...]


def node_shape(resource: str, sharing_mode: str) -> str | None:
    """The shape a node resource offers, or None when it is no GPU resource."""
    if resource == GPU:
        return {"timeslice": "time-slice replica", "vgpu": "hami vGPU slot"}.get(sharing_mode, "whole GPU")
    if resource.startswith(MIG_PREFIX):
        return "mig " + resource[len(MIG_PREFIX):]
    if resource in HAMI_RESOURCES:
        return "hami " + resource.split("/")[1]
    return None


def placeable_profiles(model: str, instances: Mapping[str, int]) -> tuple[str, ...]:
    """Profiles of `model` that fit beside `instances` on one card (step 2), sorted by name;
    media-extension profiles are left out (a workload asks for them by name, rarely)."""
    try:
        geometry = gpu_model(model)
    except InputError:
        return ()
    base = {p: n for p, n in instances.items() if n}
    if not geometry.placeable(base):
        return ()  # a layout the catalog cannot place: say nothing rather than guess
    return tuple(
        name for name, p in sorted(geometry.profiles.items())
        if not p.media_extensions and geometry.placeable({**base, name: base.get(name, 0) + 1})
    )


def hami_left(cluster: str, node: str, pool: str | None, model: str | None, *,
              memory_mib: float | None, used_mib: float, used_cores: float) -> list[DeviceFree]:
    """Step 3, HAMi: one card's memory left (when its size is known) and cores left (percent),
    its size minus what the allocations alive at the newest observation use, never below 0."""
    out = []
    if memory_mib:
        out.append(DeviceFree(cluster, node, pool, model, "hami gpumem MiB",
                              max(0.0, float(memory_mib) - float(used_mib))))
    out.append(DeviceFree(cluster, node, pool, model, "hami gpucores %", max(0.0, 100.0 - float(used_cores))))
    return out


def capacity_now(nodes: Iterable[NodeState], cards: Iterable[CardState] = (),
                 devices: Iterable[DeviceFree] = ()) -> list[ShapeFree]:
    """Steps 1-3, summed per (cluster, pool, model, shape); zero rows are left out."""
    ready: dict[tuple[str, str | None, str | None, str], float] = defaultdict(float)
    placeable: dict[tuple[str, str | None, str | None, str], int] = defaultdict(int)
    where: dict[tuple[str, str | None, str | None, str], set[str]] = defaultdict(set)
    for n in nodes:
        for resource, free in n.free().items():
            shape = node_shape(resource, n.sharing_mode)
            if shape is None or free <= 0:
                continue
            key = (n.cluster, n.pool, n.model, shape)
            ready[key] += free
            where[key].add(n.node)
    for c in cards:
        for profile in placeable_profiles(c.model, c.instances):
            key = (c.cluster, c.pool, c.model, "mig " + profile)
            placeable[key] += 1
            where[key].add(c.node)
    for d in devices:
        if d.free > 0:
            key = (d.cluster, d.pool, d.model, d.shape)
            ready[key] += d.free
            where[key].add(d.node)
    keys = sorted(set(ready) | set(placeable), key=lambda k: tuple(str(x) for x in k))
    return [ShapeFree(*k, ready=ready.get(k, 0.0), placeable=placeable.get(k, 0),
                      nodes=tuple(sorted(where[k]))) for k in keys]

