"""DRA objects (resource.k8s.io/v1) as warehouse rows: pure functions over the API's JSON.

Why apart from the lister (`collectors.dra`): the same parsing serves a live list and a
recorded history of objects (a claim created and released between two collections is only in
such a history), so one code path turns either into `dra_devices`, `dra_claims`,
`dra_reservations`, `node_planes` and the DRA cards' `gpus` rows.

Shapes read (Kubernetes 1.34+, GA): a ResourceSlice's `spec.driver`, `spec.pool.name`,
`spec.nodeName` and `spec.devices[]` (`name`, `attributes` as `{string|int|bool|version: v}`
maps whose keys may carry the driver's domain, `capacity.memory.value`, `consumesCounters` on a
partition the driver creates on demand); a ResourceClaim's `spec.devices.requests[]` (`name`,
`exactly.deviceClassName` or `firstAvailable[].deviceClassName`), `spec.devices.config[]` and
`status.allocation.devices.results[]` (`request`, `driver`, `pool`, `device`) with
`status.allocation.devices.config[]`, `status.allocation.allocationTimestamp` where the server
sets it, and `status.reservedFor[]` (`resource: pods`, `name`, `uid`); a Pod's
`spec.resourceClaims[]` (`name`, `resourceClaimName` | `resourceClaimTemplateName`) and
`status.resourceClaimStatuses[]` (`name`, `resourceClaimName`).
NVIDIA's driver (`gpu.nvidia.com`) names a device's facts `type` (gpu | mig), `uuid`,
`parentUUID`, `profile`, `productName` (unqualified keys). It publishes no index and no
placement attribute: both are in the device's name (`device_name`, docs/decisions/0164), and a
MIG device's memory slices are also its `memorySlice<N>` capacities (static MIG) or the
`memory-slice-N` counters it consumes (dynamic MIG). The `index`/`parentIndex`/`memorySliceStart`
attributes of `v1beta1`-era drivers are read where no name says it.

A claim's span starts when it was allocated (`allocated_at`): the server's
`allocationTimestamp` where set (alpha, normally absent), else when the first pod reserving it
was scheduled (the scheduler allocates a claim in the scheduling cycle of its first consumer),
else the previous list's time (`since`: allocated after it, at the earliest; an over-count
bounded by the collection interval) or this list's when there was none; never the claim's
creation, which for a claim waiting for its first consumer can be hours earlier
(docs/decisions/0164).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from kubernetes.utils import parse_quantity

from gpuledger.core.dra_names import device_name
from gpuledger.core.frames_dra import API_SOURCE
from gpuledger.core.mig import canonical_model

NVIDIA_DRIVER = "gpu.nvidia.com"
DRA_PLANE, PLUGIN_PLANE = "dra", "device-plugin"
Obj = Mapping[str, Any]


def parse_ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def attributes(device: Obj) -> dict[str, Any]:
    """A device's attributes as plain values, the driver's domain prefix dropped."""
    out: dict[str, Any] = {}
    for key, value in (device.get("attributes") or {}).items():
        name = key.rsplit("/", 1)[-1]
        if isinstance(value, Mapping):
            out[name] = next((value[k] for k in ("string", "int", "bool", "version") if k in value), None)
    return out


def _memory_mib(device: Obj) -> float | None:
    memory = ((device.get("capacity") or {}).get("memory") or {}).get("value")
    return float(parse_quantity(memory)) / 2**20 if memory is not None else None


_SLICE_CAPACITY = re.compile(r"^memorySlice(\d+)$")
_SLICE_COUNTER = re.compile(r"^memory-slice-(\d+)$")


def _first_slice(device: Obj) -> int | None:
    """The lowest memory slice a MIG device covers: its `memorySlice<N>` capacities (static
    MIG) or the `memory-slice-N` counters it consumes (a partition of dynamic MIG)."""
    found = [int(m.group(1)) for key in (device.get("capacity") or {}) if (m := _SLICE_CAPACITY.match(key))]
    for use in device.get("consumesCounters") or []:
        found.extend(int(m.group(1)) for key in (use.get("counters") or {})
                     if (m := _SLICE_COUNTER.match(key)))
    return min(found) if found else None


def placement_of(device: Obj, attrs: Mapping[str, Any]) -> int:
    """A MIG device's placement (memory-slice start): from its name, else its memory slices,
    else a `v1beta1`-era attribute; -1 where nothing says it."""
    for found in (device_name(device.get("name")).placement, _first_slice(device),
                  attrs.get("memorySliceStart"), attrs.get("placementStart")):
        if found is not None:
            return int(found)
    return -1


def card_index(device: Obj, attrs: Mapping[str, Any], mig: bool) -> int | None:
    """The card's index on its node: a `v1beta1`-era `index`/`parentIndex` attribute, else the
    `gpu-<N>` prefix of the device's name (the card's minor number in current drivers)."""
    legacy = attrs.get("parentIndex", attrs.get("index")) if mig else attrs.get("index")
    return int(legacy) if legacy is not None else device_name(device.get("name")).card


def device_rows(slices: Iterable[Obj], at: datetime) -> list[dict[str, Any]]:
    """`dra_devices` rows: one per device of each slice, MIG partitions with their parent card."""
    rows: list[dict[str, Any]] = []
    for item in slices:
        spec = item.get("spec") or {}
        for device in spec.get("devices") or []:
            attrs = attributes(device)
            kind = "mig" if str(attrs.get("type", "gpu")) == "mig" or attrs.get("profile") else "gpu"
            uuid = attrs.get("uuid")
            parent = attrs.get("parentUUID") if kind == "mig" else uuid
            if not parent:
                continue  # a device we cannot place on a card is not a GPU we bill
            product = str(attrs.get("productName") or "")
            rows.append({
                "driver": spec.get("driver"), "pool": (spec.get("pool") or {}).get("name"),
                "device": device.get("name"), "node": spec.get("nodeName"), "kind": kind,
                "uuid": uuid, "parent_uuid": parent,
                "profile": str(attrs["profile"]) if kind == "mig" and attrs.get("profile") else None,
                "placement": placement_of(device, attrs) if kind == "mig" else -1,
                "model": canonical_model(product) if product else None,
                "memory_mib": _memory_mib(device),
                "dynamic": 1 if device.get("consumesCounters") else 0, "observed_at": at,
                "source": API_SOURCE,
            })
    return rows


def _sharing(configs: Iterable[Obj], request: str) -> str:
    """The sharing strategy NVIDIA's GpuConfig sets for `request` (exclusive when none does)."""
    for config in configs:
        wanted = config.get("requests") or []
        if wanted and request.split("/", maxsplit=1)[0] not in wanted and request not in wanted:
            continue
        strategy = str((((config.get("opaque") or {}).get("parameters") or {}).get("sharing") or {})
                       .get("strategy", "")).lower()
        if strategy in ("timeslicing", "time-slicing"):
            return "timeslicing"
        if strategy == "mps":
            return "mps"
    return "exclusive"


def _device_classes(spec: Obj) -> dict[str, str]:
    classes: dict[str, str] = {}
    for req in (spec.get("devices") or {}).get("requests") or []:
        exact = req.get("exactly") or {}
        if exact.get("deviceClassName"):
            classes[req["name"]] = exact["deviceClassName"]
        for sub in req.get("firstAvailable") or []:
            classes[f"{req['name']}/{sub.get('name')}"] = sub.get("deviceClassName")
    return classes


def scheduled_at(pod: Obj) -> datetime | None:
    """When `pod` was bound to its node: its `PodScheduled` condition's transition time, else
    its `status.startTime` (set by the kubelet seconds after the binding); None while pending
    unscheduled. A claim is allocated in the scheduling cycle of its first consumer."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and str(condition.get("status")) == "True":
            moment = parse_ts(condition.get("lastTransitionTime"))
            if moment is not None:
                return moment
    return parse_ts(status.get("startTime"))


def allocated_at(item: Obj, users: Mapping[tuple[str, str], list[Obj]], at: datetime,
                 since: datetime | None = None) -> datetime:
    """When the claim `item` (allocated at `at`) was allocated, by the evidence in order (module
    docstring): `allocationTimestamp`; the earliest scheduling of a pod in its `reservedFor`
    (never before the claim's creation); the previous list `since` (the claim was allocated
    after it at the earliest only if that list did not see it: an over-count bounded by the
    collection interval), else `at` itself. Never later than `at`."""
    meta, status = item.get("metadata") or {}, item.get("status") or {}
    stamped = parse_ts((status.get("allocation") or {}).get("allocationTimestamp"))
    if stamped is not None:
        return min(stamped, at)
    created = parse_ts(meta.get("creationTimestamp"))
    reserving = {ref.get("name") for ref in status.get("reservedFor") or [] if ref.get("resource") == "pods"}
    pods = users.get((str(meta.get("namespace")), str(meta.get("name"))), [])
    times = [t for p in pods if (p.get("metadata") or {}).get("name") in reserving
             if (t := scheduled_at(p)) is not None]
    if times:
        first = min(times)
        return min(max(first, created) if created is not None else first, at)
    if since is not None and since < at:
        return max(since, created) if created is not None else since
    return at


def claim_rows(claims: Iterable[Obj], templates: Mapping[tuple[str, str], str], at: datetime,
               users: Mapping[tuple[str, str], list[Obj]] | None = None,
               since: datetime | None = None) -> list[dict[str, Any]]:
    """`dra_claims` rows: each allocated device of each allocated claim, from allocation
    (`allocated_at`; `users` are the pods naming each claim, `pod_claims`) to release (the
    deletion time where the claim is being deleted, else `at`: still held)."""
    rows: list[dict[str, Any]] = []
    for item in claims:
        meta, spec = item.get("metadata") or {}, item.get("spec") or {}
        allocation = (item.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        if not results:
            continue
        start = allocated_at(item, users or {}, at, since)
        end = min(parse_ts(meta.get("deletionTimestamp")) or at, at)
        configs = [*((spec.get("devices") or {}).get("config") or []),
                   *((allocation.get("devices") or {}).get("config") or [])]
        classes = _device_classes(spec)
        key = (str(meta.get("namespace")), str(meta.get("name")))
        for result in results:
            request = str(result.get("request"))
            rows.append({
                "claim_uid": meta.get("uid"), "request": request, "driver": result.get("driver"),
                "pool": result.get("pool"), "device": result.get("device"),
                "namespace": key[0], "claim": key[1],
                "device_class": classes.get(request, classes.get(request.split("/", maxsplit=1)[0])),
                "template": templates.get(key), "sharing": _sharing(configs, request),
                "start_ts": min(start, end), "end_ts": end, "source": API_SOURCE,
            })
    return rows


def pod_claims(pods: Iterable[Obj]) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], list[Obj]]]:
    """From the pods' side: the template each generated claim came from, and the pods that
    name each claim (namespace, claim name) in `status.resourceClaimStatuses` or their spec."""
    templates: dict[tuple[str, str], str] = {}
    users: dict[tuple[str, str], list[Obj]] = {}
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        ns = str(meta.get("namespace"))
        generated = {s.get("name"): s.get("resourceClaimName")
                     for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        for ref in spec.get("resourceClaims") or []:
            name = ref.get("resourceClaimName") or generated.get(ref.get("name"))
            if not name:
                continue
            if ref.get("resourceClaimTemplateName"):
                templates[(ns, name)] = ref["resourceClaimTemplateName"]
            users.setdefault((ns, name), []).append(pod)
    return templates, users


def reservation_rows(claims: Iterable[Obj], users: Mapping[tuple[str, str], list[Obj]],
                     at: datetime, since: datetime | None = None) -> list[dict[str, Any]]:
    """`dra_reservations` rows: the pods in each allocated claim's `status.reservedFor`, from
    when the pod was scheduled (the scheduler reserves the claim for it then; its creation
    where nothing says it), never before the claim's allocation, until `at` or the pod's
    deletion."""
    rows: list[dict[str, Any]] = []
    for item in claims:
        meta, status = item.get("metadata") or {}, item.get("status") or {}
        if not (status.get("allocation") or {}):
            continue
        named = users.get((str(meta.get("namespace")), str(meta.get("name"))), [])
        pods = {p.get("metadata", {}).get("name"): p for p in named}
        claim_start = allocated_at(item, users, at, since)
        for ref in status.get("reservedFor") or []:
            if ref.get("resource") != "pods":
                continue
            pod = pods.get(ref.get("name"), {})
            pmeta = pod.get("metadata") or {}
            started = scheduled_at(pod) or parse_ts(pmeta.get("creationTimestamp"))
            end = min(parse_ts(pmeta.get("deletionTimestamp")) or at, at)
            start = min(max(started or claim_start, claim_start), end)
            rows.append({"claim_uid": meta.get("uid"), "namespace": meta.get("namespace"),
                         "pod": ref.get("name"), "start_ts": start, "end_ts": end})
    return rows


def plane_rows(nodes: Iterable[Obj], devices: list[dict[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """`node_planes`: a node whose GPUs an NVIDIA DRA driver publishes is on the DRA plane (MIG
    Manager labels must never be written to it), any other GPU node on the device-plugin plane."""
    published: dict[str, list[dict[str, Any]]] = {}
    for row in devices:
        if row["node"] and str(row["driver"]).endswith(NVIDIA_DRIVER):
            published.setdefault(row["node"], []).append(row)
    rows: list[dict[str, Any]] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        name, labels = meta.get("name"), meta.get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        plugin = [k for k in allocatable if k.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))]
        if name in published:
            dynamic = int(any(d["dynamic"] for d in published[name]))
            evidence = f"{len(published[name])} devices in ResourceSlices of {NVIDIA_DRIVER}"
            if plugin:
                evidence += f"; also device-plugin resources {sorted(plugin)}"
            rows.append({"node": name, "plane": DRA_PLANE, "dynamic_mig": dynamic,
                         "evidence": evidence, "observed_at": at})
        elif plugin or any(k.startswith("nvidia.com/mig.config") for k in labels):
            rows.append({"node": name, "plane": PLUGIN_PLANE, "dynamic_mig": 0,
                         "evidence": "device-plugin resources or MIG Manager labels", "observed_at": at})
    return rows


def card_rows(slices: Iterable[Obj], at: datetime) -> list[dict[str, Any]]:
    """`gpus` rows for the cards the slices publish: a card whose only use is a dynamic MIG
    claim may have no dcgm series at all, and the bill needs its model and node."""
    cards: dict[str, dict[str, Any]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        for device in spec.get("devices") or []:
            attrs = attributes(device)
            mig = str(attrs.get("type", "gpu")) == "mig" or bool(attrs.get("profile"))
            parent = attrs.get("parentUUID") if mig else attrs.get("uuid")
            product = str(attrs.get("productName") or "")
            if not parent or not product or (parent in cards and mig):
                continue
            index = card_index(device, attrs, mig)
            cards[parent] = {
                "uuid": parent, "node": spec.get("nodeName") or "", "gpu_index": index or 0,
                "model": canonical_model(product), "model_name": product,
                "memory_mib": None if mig else _memory_mib(device), "pool": None,
                "sharing_mode": "dra", "replicas": None, "first_seen": at, "last_seen": at,
            }
    return list(cards.values())


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
