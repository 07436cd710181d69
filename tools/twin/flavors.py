"""The twin's Kueue objects per GPU flavor: ResourceFlavors, the KWOK nodes that carry their
nodeLabels, and ClusterQueues whose resourceGroups list several flavors.

- `Flavor`: a ResourceFlavor (`spec.nodeLabels`) and its nodes, each a mapping resource -> amount
  as the NVIDIA device plugin advertises it: whole GPUs as `nvidia.com/gpu`, MIG instances (mixed
  strategy) as `nvidia.com/mig-<profile>` (e.g. `nvidia.com/mig-1g.10gb`), time-sliced replicas as
  `nvidia.com/gpu` times the replicas. Each node is labelled with the flavor's nodeLabels, so the
  nodeSelector Kueue injects on admission (the flavor's nodeLabels) binds the pod there.
- `FlavorQuota`: one (flavor, resource) quota of a ClusterQueue, in the order of its resourceGroups.
- `resource_groups(quotas)`: flavors that cover the same set of resources form one group, in the
  order they are listed (Kueue's rule: every flavor of a group lists every covered resource, a
  flavor sits in one group). The spec sets no `flavorFungibility`, so Kueue's defaults hold
  (v1beta2: whenCanBorrow MayStopSearch, whenCanPreempt TryNextFlavor): a workload gets the FIRST
  flavor of its group where it fits, within nominal or by borrowing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tools.twin.harness import GPU, KWOK_ANNOTATION
from tools.twin.record import GROUP, VERSION

if TYPE_CHECKING:
    from gpuledger.optimizer.quota.spec import Quota

NODE_BASE = {"cpu": "64", "memory": "512Gi", "pods": "110"}


@dataclass(frozen=True)
class Flavor:
    """A ResourceFlavor and its KWOK nodes (resource -> amount each)."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    nodes: tuple[Mapping[str, int], ...] = ()


@dataclass(frozen=True)
class FlavorQuota:
    """One (flavor, resource) row of a ClusterQueue's resourceGroups."""

    flavor: str
    resource: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @classmethod
    def of(cls, flavor: str, resource: str, quota: Quota, *, borrowing: bool = True) -> FlavorQuota:
        """The twin's quota for a planning-model one: amounts rounded to whole units (what a
        device plugin advertises); no limits where the queue does not borrow."""
        def whole(value: float | None) -> int | None:
            return None if value is None or not borrowing else round(value)

        return cls(flavor, resource, round(quota.nominal), whole(quota.borrowing_limit),
                   whole(quota.lending_limit))


def resource_flavor(flavor: Flavor) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)} if flavor.node_labels else {}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": flavor.name},
            "spec": spec}


def flavor_node(name: str, flavor: Flavor, resources: Mapping[str, int]) -> dict[str, Any]:
    """A KWOK node of `flavor`: its nodeLabels, and `resources` as capacity = allocatable."""
    status = {**NODE_BASE, **{r: str(n) for r, n in sorted(resources.items())}}
    labels = {"type": "kwok", "kubernetes.io/hostname": name, **flavor.node_labels}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"}, "labels": labels},
            "status": {"capacity": status, "allocatable": dict(status)}}


def resource_groups(quotas: tuple[FlavorQuota, ...]) -> list[dict[str, Any]]:
    """Kueue resourceGroups of `quotas` (module docstring), flavors and resources in listed order."""
    per_flavor: dict[str, list[FlavorQuota]] = {}
    for q in quotas:
        per_flavor.setdefault(q.flavor, []).append(q)
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for name, rows in per_flavor.items():
        resources = []
        for q in rows:
            row: dict[str, Any] = {"name": q.resource, "nominalQuota": q.nominal}
            if q.borrowing_limit is not None:
                row["borrowingLimit"] = q.borrowing_limit
            if q.lending_limit is not None:
                row["lendingLimit"] = q.lending_limit
            resources.append(row)
        groups.setdefault(tuple(q.resource for q in rows), []).append({"name": name, "resources": resources})
    return [{"coveredResources": list(covered), "flavors": flavors} for covered, flavors in groups.items()]


def node_names(namespace: str, flavors: tuple[Flavor, ...]) -> list[tuple[str, Flavor, Mapping[str, int]]]:
    """(node name, flavor, resources) of every KWOK node, names unique per replay namespace."""
    return [(f"twin-{namespace}"[:50] + f"-f{i}n{j}", flavor, res)
            for i, flavor in enumerate(flavors) for j, res in enumerate(flavor.nodes)]


def default_flavor(name: str, nodes: tuple[int, ...]) -> Flavor:
    """The one-flavor twin of a window without flavors: no nodeLabels, whole GPUs per node."""
    return Flavor(name, {}, tuple({GPU: n} for n in nodes))
