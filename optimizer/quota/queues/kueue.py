"""Kueue (`kueue.x-k8s.io/v1beta2`) as a `QuotaReader`: ClusterQueues ⇄ the planning model.

A ClusterQueue carries `spec.cohortName`, `spec.fairSharing.weight` and
`spec.resourceGroups[].flavors[].resources[]` with `nominalQuota`, `borrowingLimit` and
`lendingLimit`. Only GPU resources (`nvidia.com/gpu`, `nvidia.com/mig-*`) and the DRA quota
resources the settings name (`queues.kueue_dra_resources`: the names Kueue's
`deviceClassMappings` give DeviceClasses) are planned; cpu, memory and the like are left exactly
as they are. `resourceGroups` is one atomic value for
Kueue, so a plan carries the whole rewritten list. Teams and pod sizes come through
LocalQueues (`spec.clusterQueue`) and their namespaces.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from gpuledger.analytics.teams.queues import queue_owners
from gpuledger.core.errors import InputError
from gpuledger.core.yamlfile import refuse_unknown_keys
from gpuledger.optimizer.quota.queues import READERS, RequestSizes, request_sizes
from gpuledger.optimizer.quota.spec import GPU, Key, QueueSpec, Quota, is_gpu_resource, parse_quantity
from gpuledger.warehouse.queries.optimizer import pod_requests_by_queue

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse


def queue_from_object(obj: Mapping[str, Any], where: str, dra: Collection[str] = ()) -> QueueSpec:
    """A ClusterQueue object (or a mapping with `name` and `spec`) → QueueSpec; `dra` names the
    DRA quota resources planned besides GPUs and MIG instances."""
    if not isinstance(obj, Mapping):
        raise InputError(f"{where}: a ClusterQueue must be a mapping")
    refuse_unknown_keys(obj, _OBJECT_KEYS, where)
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InputError(f"{where}: metadata must be a mapping")
    name = meta.get("name") or obj.get("name")
    if not name or not isinstance(name, str):
        raise InputError(f"{where}: a ClusterQueue needs metadata.name")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError(f"{where}: ClusterQueue {name}: spec must be a mapping")
    refuse_unknown_keys(spec, _SPEC_KEYS, f"{where}: ClusterQueue {name} spec")
    fair = spec.get("fairSharing") or {}
    _strict(fair, ("weight",), f"{where}: ClusterQueue {name} fairSharing")
    weight_raw = fair.get("weight", 1)
    weight = parse_quantity(weight_raw, f"{where}: ClusterQueue {name} fairSharing.weight")
    groups = spec.get("resourceGroups") or []
    if not isinstance(groups, list):
        raise InputError(f"{where}: ClusterQueue {name}: resourceGroups must be a list")
    return QueueSpec(
        name=str(name), cohort=spec.get("cohortName"), weight=weight,
        quotas=_quotas(groups, f"{where}: ClusterQueue {name}", dra),
        resource_groups=tuple(groups), resource_version=meta.get("resourceVersion"),
        team=obj.get("team"), reclaims=_reclaims(spec.get("preemption"), f"{where}: ClusterQueue {name}"),
    )


RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
"""Kueue's `preemption.reclaimWithinCohort` values (default Never)."""


def _reclaims(preemption: Any, where: str) -> bool:
    """Whether the queue preempts the cohort's borrowers whatever their priority (`Any`).
    `LowerPriority` is read as Never: the replay has no priorities, and at equal priority it
    preempts nobody. The other preemption fields are not modelled and left as they are."""
    if preemption is None:
        return False
    _strict(preemption, ("reclaimWithinCohort", "borrowWithinCohort", "withinClusterQueue"),
            f"{where} preemption")
    policy = preemption.get("reclaimWithinCohort", "Never")
    if policy not in RECLAIM_POLICIES:
        raise InputError(f"{where} preemption.reclaimWithinCohort: {policy!r} is not one of "
                         f"{', '.join(RECLAIM_POLICIES)}")
    return bool(policy == "Any")


def _quotas(groups: list[Any], where: str, dra: Collection[str]) -> dict[Key, Quota]:
    """The planned (GPU, MIG, DRA) quotas of a resourceGroups list, per (flavor, resource)."""
    quotas: dict[Key, Quota] = {}
    for g, group in enumerate(groups):
        gwhere = f"{where} resourceGroups[{g}]"
        _strict(group, ("coveredResources", "flavors"), gwhere)
        for flavor in group.get("flavors") or []:
            _strict(flavor, ("name", "resources"), f"{gwhere} flavor")
            fname = flavor.get("name")
            for res in flavor.get("resources") or []:
                _strict(res, _RESOURCE_KEYS, f"{gwhere} flavor {fname} resource")
                if not is_gpu_resource(str(res.get("name")), dra):
                    continue  # cpu, memory, ...: not planned, left exactly as they are
                rwhere = f"{gwhere} flavor {fname} {res.get('name')}"
                if (str(fname), str(res["name"])) in quotas:
                    raise InputError(f"{rwhere}: listed twice")
                if "nominalQuota" not in res:
                    raise InputError(f"{rwhere}: nominalQuota is required")
                quotas[(str(fname), str(res["name"]))] = Quota(
                    nominal=parse_quantity(res["nominalQuota"], rwhere + " nominalQuota"),
                    borrowing_limit=_optional(res.get("borrowingLimit"), rwhere + " borrowingLimit"),
                    lending_limit=_optional(res.get("lendingLimit"), rwhere + " lendingLimit"),
                )
    return quotas


_OBJECT_KEYS = ("apiVersion", "kind", "metadata", "spec", "status", "name", "team")
_SPEC_KEYS = (
    "resourceGroups", "cohortName", "cohort", "queueingStrategy", "namespaceSelector",
    "flavorFungibility", "preemption", "admissionChecks", "admissionChecksStrategy",
    "stopPolicy", "fairSharing", "admissionScope",
)
"""Kueue's ClusterQueue spec fields: a misspelt `cohortNmae` would silently plan the queue
alone, so unknown ones are refused; metadata and status are Kubernetes' and left free."""
_RESOURCE_KEYS = ("name", "nominalQuota", "borrowingLimit", "lendingLimit")


def _strict(value: Any, allowed: tuple[str, ...], where: str) -> None:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected a mapping, got {value!r}")
    refuse_unknown_keys(value, allowed, where)


def _optional(value: Any, where: str) -> float | None:
    return None if value is None else parse_quantity(value, where)


def rewrite_groups(groups: tuple[dict[str, Any], ...], quotas: Mapping[tuple[str, str], Quota]
                   ) -> tuple[dict[str, Any], ...]:
    """The whole resourceGroups list with the planned numbers replaced."""
    out = copy.deepcopy(list(groups))
    for group in out:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                quota = quotas.get((flavor.get("name"), res.get("name")))
                if quota is None:
                    continue
                res["nominalQuota"] = _number(quota.nominal)
                for field, value in (("borrowingLimit", quota.borrowing_limit),
                                     ("lendingLimit", quota.lending_limit)):
                    if value is None:
                        res.pop(field, None)
                    else:
                        res[field] = _number(value)
    return tuple(out)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def pod_request_sizes(wh: Warehouse) -> RequestSizes:
    """Each ClusterQueue's pods' requests (through its LocalQueues) in whole GPUs or MIG
    instances."""
    rows = pod_requests_by_queue(wh, "LocalQueue").iter_rows(named=True)
    return request_sizes((((json.loads(r["spec"] or "{}")).get("clusterQueue"), r["gpu_requests"], r["pods"])
                          for r in rows), lambda k: k == GPU or k.startswith("nvidia.com/mig-"))


class KueueReader:
    """Kueue's part of the optimize stage (see the module docstring)."""

    name = "kueue"
    object_kind = "ClusterQueue"
    file_key = "clusterQueues"

    def queue_from_object(self, obj: Mapping[str, Any], where: str,
                          dra: Collection[str] = ()) -> QueueSpec:
        return queue_from_object(obj, where, dra)

    def queue_teams(self, wh: Warehouse) -> dict[str, str]:
        return queue_owners(wh)

    def request_sizes(self, wh: Warehouse) -> RequestSizes:
        return pod_request_sizes(wh)

    def observed_state(self, queue: QueueSpec) -> dict[str, Any]:
        return {"cohortName": queue.cohort, "resourceGroups": list(queue.resource_groups)}

    def rewrite(
        self, queue: QueueSpec, quotas: Mapping[tuple[str, str], Quota],
    ) -> tuple[dict[str, Any], ...]:
        return rewrite_groups(queue.resource_groups, quotas)


KUEUE = READERS.register("kueue", KueueReader())
