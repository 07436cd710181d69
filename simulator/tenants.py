"""Tenants: namespaces (most labeled `team=<t>`, a few not), and the Kueue objects.

Each team owns a namespace `<team>` (training, evaluation, notebooks, small jobs) and
`<team>-serving` (inference). The `unlabeled_namespaces` carry no team label on purpose: their
cost must land on `unattributed`. Kueue: one ClusterQueue per team (plus `shared` for the
unlabeled namespaces) in one cohort; LocalQueues `train` and `batch` in every namespace that
runs batch work; one ResourceFlavor per pool. Nominal quotas split each pool's capacity by
team weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuledger.core.mig import gpu_model
from gpuledger.simulator.fleet import FleetSpec, PoolSpec

COHORT = "gpu-fleet"
SHARED_QUEUE = "shared"
LOCAL_QUEUES = ("train", "batch")


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    team: str | None
    serving: bool

    @property
    def cluster_queue(self) -> str:
        return self.team or SHARED_QUEUE

    @property
    def labels(self) -> dict[str, str]:
        base = {"kubernetes.io/metadata.name": self.name}
        return {**base, "team": self.team} if self.team else base


@dataclass(frozen=True, slots=True)
class Tenants:
    namespaces: tuple[Namespace, ...]
    weights: tuple[tuple[str, float], ...]
    unlabeled_fraction: float

    @property
    def team_weights(self) -> dict[str, float]:
        return dict(self.weights)

    def by_name(self) -> dict[str, Namespace]:
        return {ns.name: ns for ns in self.namespaces}

    def cluster_queues(self) -> list[str]:
        return [*self.team_weights, SHARED_QUEUE]


def build_tenants(spec: FleetSpec) -> Tenants:
    namespaces: list[Namespace] = []
    for team in spec.teams:
        namespaces.append(Namespace(team.name, team.name, serving=False))
        namespaces.append(Namespace(f"{team.name}-serving", team.name, serving=True))
    for name in spec.unlabeled_namespaces:
        namespaces.append(Namespace(name, None, serving="serving" in name))
    return Tenants(
        tuple(namespaces), tuple((t.name, t.weight) for t in spec.teams), spec.unlabeled_fraction
    )


def pool_resources(pool: PoolSpec) -> list[str]:
    """The extended resources a pool's pods request (what Kueue quotas cover)."""
    if pool.sharing == "mig":
        names = sorted({p for counts in pool.mig_configs.values() for p in counts})
        return [gpu_model(pool.model).profile(n).resource_name for n in names]
    return ["nvidia.com/gpu"]


def pool_capacity(spec: FleetSpec, pool: PoolSpec) -> dict[str, int]:
    """Allocatable amount per resource of the pool's first configuration."""
    cards = pool.nodes * spec.pool_gpus_per_node(pool)
    if pool.sharing == "exclusive":
        return {"nvidia.com/gpu": cards}
    if pool.sharing == "timeslice":
        return {"nvidia.com/gpu": cards * pool.replicas}
    if pool.sharing == "vgpu":
        slots = sum(len(pool.vgpu_splits[i % len(pool.vgpu_splits)]) for i in range(cards))
        return {"nvidia.com/gpu": slots}
    out: dict[str, int] = {}
    names = list(pool.mig_configs)
    model = gpu_model(pool.model)
    for n in range(pool.nodes):
        for prof, count in pool.mig_configs[names[n % len(names)]].items():
            res = model.profile(prof).resource_name
            out[res] = out.get(res, 0) + count * spec.pool_gpus_per_node(pool)
    return {r: out.get(r, 0) for r in pool_resources(pool)}


def nominal_quotas(spec: FleetSpec, tenants: Tenants) -> dict[tuple[str, str, str], int]:
    """(cluster queue, flavor, resource) -> nominal quota, by team weight (shared gets the
    unlabeled fraction)."""
    total = sum(tenants.team_weights.values())
    out: dict[tuple[str, str, str], int] = {}
    for pool in spec.pools:
        for resource, cap in pool_capacity(spec, pool).items():
            for team, weight in tenants.team_weights.items():
                share = (1 - tenants.unlabeled_fraction) * weight / total
                out[(team, pool.name, resource)] = round(cap * share)
            out[(SHARED_QUEUE, pool.name, resource)] = round(cap * tenants.unlabeled_fraction)
    return out


def cluster_queue_spec(
    spec: FleetSpec, quotas: dict[tuple[str, str, str], int], queue: str, weight: float
) -> dict[str, Any]:
    """A Kueue v1beta2 ClusterQueue spec; flavors sharing the same resources form one group."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for pool in spec.pools:
        resources = tuple(pool_resources(pool))
        flavor: dict[str, Any] = {
            "name": pool.name,
            "resources": [
                {"name": r, "nominalQuota": quotas[(queue, pool.name, r)]} for r in resources
            ],
        }
        groups.setdefault(resources, []).append(flavor)
    return {
        "cohortName": COHORT,
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "fairSharing": {"weight": str(weight)},
        "resourceGroups": [
            {"coveredResources": list(res), "flavors": flavors} for res, flavors in groups.items()
        ],
    }
