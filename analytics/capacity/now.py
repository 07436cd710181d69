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
   observation). A HAMi pod takes its memory and cores from ONE card, so these shapes are never
   summed over cards: `ready` is the most one card has left, and `per_card` lists each card's.

A row per (cluster, pool, model, shape): `ready` (schedulable now), `placeable` (cards where the
profile can be added by a layout change), `nodes` (where, sorted), `per_card` (HAMi shapes).

Shape names are this module's alone (`node_shape` for what a node or card offers,
`request_need` for what a request asks of one card or node): the suggestion matches a request to
a row by these names, so a second spelling would silently never match (issue 35 review).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuledger.core.errors import InputError
from gpuledger.core.mig import gpu_model

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_MEM_RESOURCE = "nvidia.com/gpumem"
HAMI_CORES_RESOURCE = "nvidia.com/gpucores"
HAMI_RESOURCES = (HAMI_MEM_RESOURCE, HAMI_CORES_RESOURCE)

WHOLE = "whole GPU"
TIMESLICE = "time-slice replica"
HAMI_SLOT = "hami vGPU slot"
HAMI_MEM = "hami gpumem MiB"
HAMI_CORES = "hami gpucores %"
PER_CARD = frozenset({HAMI_MEM, HAMI_CORES})
"""Shapes one pod takes from one card: `ready` is the largest card's, never a sum."""


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
    card: str | None = None
    """The card (uuid) the amount is on, for the per-card shapes (`PER_CARD`)."""


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
    per_card: tuple[tuple[str, float], ...] = ()
    """Per-card shapes: (`node/uuid`, free) of every card with some left, most first."""


def mig_shape(profile: str) -> str:
    return "mig " + profile


def node_shape(resource: str, sharing_mode: str) -> str | None:
    """The shape a node resource offers, or None when it is no GPU resource."""
    if resource == GPU:
        return {"timeslice": TIMESLICE, "vgpu": HAMI_SLOT}.get(sharing_mode, WHOLE)
    if resource.startswith(MIG_PREFIX):
        return mig_shape(resource[len(MIG_PREFIX):])
    return {HAMI_MEM_RESOURCE: HAMI_MEM, HAMI_CORES_RESOURCE: HAMI_CORES}.get(resource)


def shape_kind(shape: str) -> str:
    """The family of a shape, for grouping a table: `whole GPU`, `MIG`, `time-slice`, `HAMi`,
    `DRA` (`dra gpu`, `dra mig-<profile>`: named by `warehouse.queries.waiting.dra_free`)."""
    if shape == WHOLE:
        return "whole GPU"
    if shape == TIMESLICE:
        return "time-slice"
    for prefix, kind in (("mig ", "MIG"), ("hami ", "HAMi"), ("dra ", "DRA")):
        if shape.startswith(prefix):
            return kind
    return "other"


def shape_unit(shape: str) -> str:
    """What a shape's `ready` counts: devices or replicas, or, for the per-card shapes, the
    amount left on the best card."""
    if shape in PER_CARD:
        return {HAMI_MEM: "MiB on one card", HAMI_CORES: "% on one card"}[shape]
    return {"whole GPU": "GPUs", "MIG": "instances", "time-slice": "replicas", "DRA": "devices"}.get(
        shape_kind(shape), "vGPU slots" if shape == HAMI_SLOT else "units")


def request_need(requests: Mapping[str, float]) -> tuple[str, float] | None:
    """The shape a request asks of one card or node, and how much, in `node_shape`'s names: a
    MIG profile (count), HAMi memory (MiB a vGPU takes from one card), else HAMi cores
    (percent), else whole GPUs (count); None when it asks no GPU."""
    for key in sorted(requests):
        if key.startswith(MIG_PREFIX):
            return mig_shape(key[len(MIG_PREFIX):]), float(requests[key])
    for resource, shape in ((HAMI_MEM_RESOURCE, HAMI_MEM), (HAMI_CORES_RESOURCE, HAMI_CORES), (GPU, WHOLE)):
        if resource in requests:
            return shape, float(requests[resource])
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
              memory_mib: float | None, used_mib: float, used_cores: float,
              card: str | None = None) -> list[DeviceFree]:
    """Step 3, HAMi: one card's memory left (when its size is known) and cores left (percent),
    its size minus what the allocations alive at the newest observation use, never below 0."""
    out = []
    if memory_mib:
        out.append(DeviceFree(cluster, node, pool, model, HAMI_MEM,
                              max(0.0, float(memory_mib) - float(used_mib)), card))
    out.append(DeviceFree(cluster, node, pool, model, HAMI_CORES, max(0.0, 100.0 - float(used_cores)), card))
    return out


def capacity_now(nodes: Iterable[NodeState], cards: Iterable[CardState] = (),
                 devices: Iterable[DeviceFree] = ()) -> list[ShapeFree]:
    """Steps 1-3, summed per (cluster, pool, model, shape) (the per-card shapes: the largest
    card's, with each card's in `per_card`); zero rows are left out."""
    ready: dict[tuple[str, str | None, str | None, str], float] = defaultdict(float)
    placeable: dict[tuple[str, str | None, str | None, str], int] = defaultdict(int)
    where: dict[tuple[str, str | None, str | None, str], set[str]] = defaultdict(set)
    cards_of: dict[tuple[str, str | None, str | None, str], list[tuple[str, float]]] = defaultdict(list)
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
            key = (c.cluster, c.pool, c.model, mig_shape(profile))
            placeable[key] += 1
            where[key].add(c.node)
    for d in devices:
        if d.free > 0:
            key = (d.cluster, d.pool, d.model, d.shape)
            if d.shape in PER_CARD:
                ready[key] = max(ready[key], d.free)
                cards_of[key].append((f"{d.node}/{d.card or '?'}", d.free))
            else:
                ready[key] += d.free
            where[key].add(d.node)
    keys = sorted(set(ready) | set(placeable), key=lambda k: tuple(str(x) for x in k))
    return [ShapeFree(*k, ready=ready.get(k, 0.0), placeable=placeable.get(k, 0),
                      nodes=tuple(sorted(where[k])),
                      per_card=tuple(sorted(cards_of.get(k, ()), key=lambda c: (-c[1], c[0]))))
            for k in keys]

