"""The status objects of one Kubernetes snapshot, listed once for every collector that reads them
(`collectors.pending`, `collectors.preemption`, and the `queues` table for the ClusterQueues):
Events, Kueue Workloads and ClusterQueues, Volcano PodGroups, and ResourceClaims when a pod uses
one.

Why one listing: Events and Workloads are among the largest lists a cluster serves; reading each
twice per snapshot doubled the apiserver's load for nothing, and two reads a moment apart could
disagree. A queue system that is not installed (its CRD absent: 404) lists as no objects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpuledger.core.errors import NotFoundError

Lister = Callable[..., Iterator[dict[str, Any]]]
"""`kubernetes.paginate` bound to a page size: (list call, what, **kwargs) → items."""
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
CLUSTERQUEUES = ("kueue.x-k8s.io", "v1beta2", "clusterqueues")


@dataclass(frozen=True)
class Statuses:
    """What one snapshot listed, as the API served it."""

    events: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    podgroups: list[dict[str, Any]] = field(default_factory=list)
    clusterqueues: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)

    def custom(self, group: str, version: str, plural: str) -> list[dict[str, Any]] | None:
        """The listed custom objects of (group, version, plural), or None when not listed here
        (so a queue collector lists that kind itself, once)."""
        return {WORKLOADS: self.workloads, PODGROUPS: self.podgroups,
                CLUSTERQUEUES: self.clusterqueues}.get((group, version, plural))


def _custom(page: Lister, custom: Any, group: str, version: str, plural: str) -> list[dict[str, Any]]:
    try:
        return list(page(custom.list_cluster_custom_object, f"{plural}.{group}", group=group,
                         version=version, plural=plural))
    except NotFoundError:
        return []  # that queue system is not installed


def list_statuses(items: list[dict[str, Any]], *, core: Any, custom: Any, resource: Any,
                  page: Lister) -> Statuses:
    """Each list once (`items`: the snapshot's pods, which say whether any uses a claim)."""
    claims: list[dict[str, Any]] = []
    if any((i.get("spec") or {}).get("resourceClaims") for i in items):
        with contextlib.suppress(NotFoundError):  # a cluster without DRA
            claims = list(page(resource.list_resource_claim_for_all_namespaces, "resourceclaims"))
    return Statuses(
        events=list(page(core.list_event_for_all_namespaces, "events")),
        workloads=_custom(page, custom, *WORKLOADS),
        podgroups=_custom(page, custom, *PODGROUPS),
        clusterqueues=_custom(page, custom, *CLUSTERQUEUES),
        claims=claims,
    )
