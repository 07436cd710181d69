"""Volcano (`scheduling.volcano.sh/v1beta1`) as a `QuotaReader`: Queues ⇄ the planning model.

A Volcano Queue states per resource three amounts (`guarantee <= deserved <= capability`):
`deserved` is what it is entitled to when the cluster is contended (more is lent to it while
others are idle, and reclaimed from it when they return), `capability` is its hard ceiling and
`guarantee.resource` is reserved for it alone. That is Kueue's quota triple in other words, so
each Queue maps onto the neutral `QueueSpec` and every rule of the planner (forecast, fairness,
floors, backtest) applies unchanged:

| neutral `Quota`   | Volcano                              |
|-------------------|--------------------------------------|
| `nominal`         | `deserved[r]`                        |
| `borrowing_limit` | `capability[r] - deserved[r]` (None: no capability for r, unbounded) |
| `lending_limit`   | `deserved[r] - guarantee[r]` (None: nothing guaranteed, all lendable) |
| cohort            | `spec.parent`, else `root` (children share their parent; flat queues the cluster) |
| weight            | `spec.weight` (default 1)            |
| flavor            | `default` (Volcano has no flavors)   |

Only GPU resources (`nvidia.com/gpu`, `nvidia.com/mig-*`) and HAMi's vGPU count
(`volcano.sh/vgpu-number`) are planned; cpu, memory and the rest stay exactly as they are.
The quota body a plan carries (and the plan's staleness hash) is the Queue's three maps whole.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from gpuledger.analytics.teams.volcano import volcano_queue_owners
from gpuledger.core.errors import InputError
from gpuledger.core.yamlfile import refuse_unknown_keys
from gpuledger.optimizer.quota.queues import READERS, RequestSizes, request_sizes
from gpuledger.optimizer.quota.spec import Key, QueueSpec, Quota, is_gpu_resource, parse_quantity
from gpuledger.warehouse.queries.volcano import pod_requests_by_volcano_queue

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

FLAVOR = "default"
"""The one flavor of a Volcano queue (the same name `collectors.queues.volcano_metrics` uses)."""
ROOT = "root"
"""Volcano's root queue: the parent of every queue that names none."""
VGPU = "volcano.sh/vgpu-number"
GPU_RESOURCE = "nvidia.com/gpu"
_SPEC_KEYS = ("affinity", "capability", "dequeueStrategy", "deserved", "extendClusters",
              "guarantee", "parent", "priority", "reclaimable", "type", "weight")
"""The v1.16 Queue spec fields: a misspelt `deservd` would silently plan nothing, so unknown
ones are refused."""
_OBJECT_KEYS = ("apiVersion", "kind", "metadata", "spec", "status", "name", "team")


def planned(resource: str) -> bool:
    return is_gpu_resource(resource) or resource == VGPU


def quota_body(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a Queue spec that holds quotas, as stored (what plans carry and hash)."""
    guarantee = spec.get("guarantee") or {}
    return {"capability": dict(spec.get("capability") or {}), "deserved": dict(spec.get("deserved") or {}),
            "guarantee": {"resource": dict((guarantee or {}).get("resource") or {})}}


def cohort_of(name: str, spec: Mapping[str, Any]) -> str | None:
    if name == ROOT:
        return None
    return str(spec.get("parent") or ROOT)


def queue_state(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """What a quota plan depends on: the cohort and the quota body (optimizer and actuator)."""
    return {"cohort": cohort_of(name, spec), **quota_body(spec)}


def queue_from_object(obj: Mapping[str, Any], where: str) -> QueueSpec:
    """A Volcano Queue object (or a mapping with `name` and `spec`) → QueueSpec."""
    if not isinstance(obj, Mapping):
        raise InputError(f"{where}: a Queue must be a mapping")
    refuse_unknown_keys(obj, _OBJECT_KEYS, where)
    meta = obj.get("metadata") or {}
    name = (meta.get("name") if isinstance(meta, Mapping) else None) or obj.get("name")
    if not name or not isinstance(name, str):
        raise InputError(f"{where}: a Queue needs metadata.name")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError(f"{where}: Queue {name}: spec must be a mapping")
    refuse_unknown_keys(spec, _SPEC_KEYS, f"{where}: Queue {name} spec")
    body = quota_body(spec)
    for part in ("capability", "deserved"):
        if not isinstance(spec.get(part) or {}, Mapping):
            raise InputError(f"{where}: Queue {name}: {part} must be a mapping of resources")
    return QueueSpec(
        name=name, cohort=cohort_of(name, spec),
        weight=parse_quantity(spec.get("weight", 1), f"{where}: Queue {name} weight"),
        quotas=_quotas(body, f"{where}: Queue {name}"), resource_groups=(body,),
        resource_version=meta.get("resourceVersion") if isinstance(meta, Mapping) else None,
        team=obj.get("team"),
    )


def _quotas(body: Mapping[str, Any], where: str) -> dict[Key, Quota]:
    cap, des, gua = body["capability"], body["deserved"], body["guarantee"]["resource"]
    quotas: dict[Key, Quota] = {}
    for res in sorted({*cap, *des, *gua}):
        if not planned(res):
            continue
        rwhere = f"{where} {res}"
        g = parse_quantity(gua[res], rwhere + " guarantee") if res in gua else None
        c = parse_quantity(cap[res], rwhere + " capability") if res in cap else None
        d = parse_quantity(des[res], rwhere + " deserved") if res in des else (c if c is not None else g)
        assert d is not None
        if (g is not None and g > d) or (c is not None and c < d):
            raise InputError(f"{rwhere}: needs guarantee <= deserved <= capability "
                             f"(got {g if g is not None else '-'} / {d} / {c if c is not None else '-'})")
        quotas[(FLAVOR, res)] = Quota(nominal=d, borrowing_limit=None if c is None else c - d,
                                      lending_limit=None if g is None else d - g)
    return quotas


def rewrite_body(body: Mapping[str, Any], quotas: Mapping[Key, Quota]) -> dict[str, Any]:
    """The three maps with the planned numbers of each (default, resource) set."""
    out = copy.deepcopy(dict(body))
    for (_flavor, res), q in quotas.items():
        out["deserved"][res] = _number(q.nominal)
        _set(out["capability"], res, None if q.borrowing_limit is None else q.nominal + q.borrowing_limit)
        reserved = None if q.lending_limit is None else q.nominal - q.lending_limit
        _set(out["guarantee"]["resource"], res, reserved)
    return out


def _set(target: dict[str, Any], key: str, value: float | None) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = _number(value)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


class VolcanoReader:
    """Volcano's part of the optimize stage (see the module docstring)."""

    name = "volcano"
    object_kind = "Queue"
    file_key = "queues"

    def queue_from_object(self, obj: Mapping[str, Any], where: str,
                          dra: Collection[str] = ()) -> QueueSpec:
        """`dra` is Kueue's (`queues.kueue_dra_resources`): Volcano has no DRA quota names."""
        del dra
        return queue_from_object(obj, where)

    def queue_teams(self, wh: Warehouse) -> dict[str, str]:
        return volcano_queue_owners(wh)

    def request_sizes(self, wh: Warehouse) -> RequestSizes:
        """Each Queue's pods' planned requests (by the pod's queue label)."""
        return request_sizes(pod_requests_by_volcano_queue(wh).iter_rows(), planned)

    def observed_state(self, queue: QueueSpec) -> dict[str, Any]:
        return {"cohort": queue.cohort, **queue.resource_groups[0]}

    def rewrite(self, queue: QueueSpec, quotas: Mapping[Key, Quota]) -> tuple[dict[str, Any], ...]:
        return (rewrite_body(queue.resource_groups[0], quotas),)


VOLCANO = READERS.register("volcano", VolcanoReader())
