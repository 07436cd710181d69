"""Workloads that wait, with the status their controllers wrote (read-only): the rows of
`pending_workloads` and `queue_usage` (`core.frames_pending`, docs/decisions/0201).

What is read, as each upstream writes it:
- **Pods** (phase `Pending`, no `spec.nodeName`) that ask for GPU resources or DRA claims:
  `status.conditions[type=PodScheduled]` with `status: "False"`, `reason: Unschedulable` and
  kube-scheduler's message (`0/3 nodes are available: 3 Insufficient nvidia.com/gpu. ...`,
  `... node(s) didn't match Pod's node affinity/selector`, `... had untolerated taint {k: v}`,
  `... cannot allocate all claims`; kubernetes/kubernetes `pkg/scheduler/framework/plugins/
  noderesources/fit.go`, `nodeaffinity/node_affinity.go` `ErrReasonPod`,
  `tainttoleration/taint_toleration.go`, `dynamicresources/dynamicresources.go`), the newest
  `FailedScheduling` event of the pod (`pkg/scheduler/schedule_one.go`), and
  `status.nominatedNodeName` (a preemptor waiting for its victims to go). A pod held by
  Kueue's scheduling gate `kueue.x-k8s.io/admission` is its Workload's business, not a row.
- **Kueue Workloads** (`kueue.x-k8s.io/v1beta2`) without `Admitted=True` and not `Finished`:
  `QuotaReserved=False` with reason `Pending` (or the granular `WaitingForQuota`,
  `ExceedsMaxQuota`, `NoMatchingFlavor`, `WaitingForPreemptedWorkloads`, ...) and the flavor
  assigner's message (`couldn't assign flavors to pod set main: insufficient unused quota for
  nvidia.com/gpu in flavor a100, 2 more needed`; kubernetes-sigs/kueue
  `pkg/scheduler/flavorassigner/flavorassigner.go`, reasons in `apis/kueue/v1beta2/
  workload_types.go`), `Evicted`/`Preempted` conditions; the requests are the pod sets'
  container requests times `count`.
- **Volcano PodGroups** (`scheduling.volcano.sh/v1beta1`) in phase `Pending` or `Inqueue`: the
  `Unschedulable` condition (reason `NotEnoughResources`, message `3/3 tasks in gang
  unschedulable: ...`; volcano-sh/website `content/en/docs/podgroup-condition-reason.md`),
  requests from `spec.minResources`.
- **ResourceClaims** of a pending pod: allocated or not (`status.allocation`).
- **ClusterQueues**: `status.flavorsReservation` (else `flavorsUsage`), per flavor and resource.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import polars as pl
from kubernetes.utils import parse_quantity

from gpuledger.collectors.statuses import Statuses
from gpuledger.core.frames_pending import PENDING_WORKLOADS, QUEUE_USAGE
from gpuledger.core.table_spec import polars_schema

GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "nvidia.com/gpumem", "nvidia.com/gpucores")
KUEUE_GATE = "kueue.x-k8s.io/admission"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
PENDING_PODGROUP_PHASES = frozenset({"Pending", "Inqueue"})


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def amount(value: Any) -> float | None:
    """A Kubernetes quantity as a float; None when it is none (the row keeps the others)."""
    try:
        return float(parse_quantity(value))
    except (ValueError, TypeError):
        return None


def is_gpu_resource(name: str) -> bool:
    return any(name == p or name.startswith(p) for p in GPU_PREFIXES)


def pod_requests(spec: Mapping[str, Any], times: int = 1) -> dict[str, float]:
    """GPU requests of a pod spec (containers; limits where requests are absent), times `times`."""
    out: dict[str, float] = {}
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        wanted = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, value in wanted.items():
            number = amount(value)
            if is_gpu_resource(name) and number is not None:
                out[name] = out.get(name, 0.0) + number * times
    return out


def _conditions(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    keep = ("type", "status", "reason", "message", "lastTransitionTime")
    return [{k: c.get(k) for k in keep if c.get(k) is not None} for c in status.get("conditions") or []]


def _controller(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    owners = meta.get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), owners[0] if owners else {})


def _row(kind: str, source: str, meta: Mapping[str, Any], at: datetime, **fields: Any) -> dict[str, Any]:
    owner = _controller(meta)
    base = {
        "kind": kind, "namespace": meta.get("namespace") or "", "name": meta.get("name"),
        "source": source, "queue": None, "owner_kind": owner.get("kind"),
        "owner_name": owner.get("name"), "requests": "{}", "pods": 1, "node_selector": "{}",
        "priority_class": None, "conditions": "[]", "event_reason": None, "event_message": None,
        "nominated_node": None, "claims": "[]",
        "created_at": parse_time(meta.get("creationTimestamp")), "first_seen": at, "last_seen": at,
    }
    base.update(fields)
    return base


def pod_rows(items: Iterable[Mapping[str, Any]], events: Mapping[tuple[str, str], Mapping[str, Any]],
             claims: Mapping[tuple[str, str], Mapping[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """Pending GPU pods (module docstring); `events`: the newest FailedScheduling per pod,
    `claims`: ResourceClaims by (namespace, name)."""
    rows = []
    for item in items:
        meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
        if status.get("phase") != "Pending" or spec.get("nodeName"):
            continue
        if any(g.get("name") == KUEUE_GATE for g in spec.get("schedulingGates") or []):
            continue
        requests = pod_requests(spec)
        refs = spec.get("resourceClaims") or []
        if not requests and not refs:
            continue
        ns = meta.get("namespace") or ""
        claim_rows = []
        by_ref = {s.get("name"): s.get("resourceClaimName")
                  for s in status.get("resourceClaimStatuses") or []}
        for ref in refs:
            name = ref.get("resourceClaimName") or by_ref.get(ref.get("name"))
            claim = claims.get((ns, name or ""))
            claim_rows.append({"name": name or ref.get("name"),
                               "allocated": bool(((claim or {}).get("status") or {}).get("allocation"))})
        event = events.get((ns, meta.get("name") or "")) or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        rows.append(_row(
            "Pod", "volcano" if spec.get("schedulerName") == "volcano" else "kube-scheduler", meta, at,
            queue=labels.get(KUEUE_QUEUE_LABEL) or annotations.get("scheduling.volcano.sh/queue-name"),
            requests=json.dumps(requests, sort_keys=True),
            node_selector=json.dumps(spec.get("nodeSelector") or {}, sort_keys=True),
            priority_class=spec.get("priorityClassName"),
            conditions=json.dumps(_conditions(status)), event_reason=event.get("reason"),
            event_message=event.get("message"), nominated_node=status.get("nominatedNodeName"),
            claims=json.dumps(claim_rows),
        ))
    return rows


def workload_rows(items: Iterable[Mapping[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """Kueue Workloads not admitted and not finished (module docstring)."""
    rows = []
    for item in items:
        meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        if any((conds.get(t) or {}).get("status") == "True" for t in ("Admitted", "Finished")):
            continue
        requests: dict[str, float] = {}
        pods = 0
        selector: dict[str, str] = {}
        for ps in spec.get("podSets") or []:
            count = int(ps.get("count") or 1)
            pods += count
            pod_spec = (ps.get("template") or {}).get("spec") or {}
            selector.update(pod_spec.get("nodeSelector") or {})
            for name, value in pod_requests(pod_spec, count).items():
                requests[name] = requests.get(name, 0.0) + value
        rows.append(_row(
            "Workload", "kueue", meta, at, queue=spec.get("queueName"),
            requests=json.dumps(requests, sort_keys=True), pods=pods or 1,
            node_selector=json.dumps(selector, sort_keys=True),
            priority_class=spec.get("priorityClassName"), conditions=json.dumps(_conditions(status)),
        ))
    return rows


def podgroup_rows(items: Iterable[Mapping[str, Any]], events: Mapping[tuple[str, str], Mapping[str, Any]],
                  at: datetime) -> list[dict[str, Any]]:
    """Volcano PodGroups still pending (module docstring)."""
    rows = []
    for item in items:
        meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
        if status.get("phase") not in PENDING_PODGROUP_PHASES:
            continue
        requests = {k: a for k, v in (spec.get("minResources") or {}).items()
                    if is_gpu_resource(k) and (a := amount(v)) is not None}
        event = events.get((meta.get("namespace") or "", meta.get("name") or "")) or {}
        rows.append(_row(
            "PodGroup", "volcano", meta, at, queue=spec.get("queue"),
            requests=json.dumps(requests, sort_keys=True), pods=int(spec.get("minMember") or 1),
            priority_class=spec.get("priorityClassName"), conditions=json.dumps(_conditions(status)),
            event_reason=event.get("reason"), event_message=event.get("message"),
        ))
    return rows


def usage_rows(items: Iterable[Mapping[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """Each ClusterQueue's reserved quota per flavor and resource (module docstring)."""
    rows = []
    for item in items:
        name = (item.get("metadata") or {}).get("name")
        status = item.get("status") or {}
        for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
            for res in flavor.get("resources") or []:
                total = amount(res.get("total", 0))
                if total is None:
                    continue
                rows.append({"cluster_queue": name, "flavor": flavor.get("name"), "resource": res.get("name"),
                             "total": total, "borrowed": amount(res.get("borrowed", 0)), "observed_at": at})
    return rows


def newest_events(events: Iterable[Mapping[str, Any]], kind: str,
                  reasons: frozenset[str]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The newest event of `reasons` per involved object of `kind` (by lastTimestamp, eventTime)."""
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    stamp: dict[tuple[str, str], str] = {}
    for e in events:
        obj = e.get("involvedObject") or {}
        if obj.get("kind") != kind or e.get("reason") not in reasons:
            continue
        key = (obj.get("namespace") or "", obj.get("name") or "")
        when = str(e.get("lastTimestamp") or e.get("eventTime") or "")
        if key not in out or when >= stamp[key]:
            out[key], stamp[key] = e, when
    return out


def frames(items: list[dict[str, Any]], at: datetime, listed: Statuses) -> dict[str, pl.DataFrame]:
    """`pending_workloads` and `queue_usage` of one snapshot (`items`: the listed pods, `listed`:
    the snapshot's status objects, `collectors.statuses`)."""
    objects: list[Mapping[str, Any]] = [{"kind": "Pod", **i} for i in items]
    for kind, found in (("Event", listed.events), ("ResourceClaim", listed.claims),
                        ("Workload", listed.workloads), ("PodGroup", listed.podgroups),
                        ("ClusterQueue", listed.clusterqueues)):
        objects += [{**o, "kind": kind} for o in found]
    return frames_from_objects(objects, at)


def frames_from_objects(objects: Iterable[Mapping[str, Any]], at: datetime) -> dict[str, pl.DataFrame]:
    """The two frames from objects as the API serves them (each with its `kind`): Pods, Events,
    ResourceClaims, Workloads, PodGroups, ClusterQueues; other kinds are ignored. The simulator's
    manifests go through here too, so the demo's statuses are parsed by the collector's code."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for o in objects:
        by_kind.setdefault(str(o.get("kind")), []).append(o)
    events = by_kind.get("Event", [])
    claims = {(str((c.get("metadata") or {}).get("namespace") or ""),
               str((c.get("metadata") or {}).get("name") or "")): c for c in by_kind.get("ResourceClaim", [])}
    rows = pod_rows(by_kind.get("Pod", []), newest_events(events, "Pod", frozenset({"FailedScheduling"})),
                    claims, at)
    rows += workload_rows(by_kind.get("Workload", []), at)
    rows += podgroup_rows(by_kind.get("PodGroup", []),
                          newest_events(events, "PodGroup", frozenset({"Unschedulable"})), at)
    usage = usage_rows(by_kind.get("ClusterQueue", []), at)
    return {
        "pending_workloads": pl.DataFrame(rows, schema=polars_schema(PENDING_WORKLOADS)),
        "queue_usage": pl.DataFrame(usage, schema=polars_schema(QUEUE_USAGE)),
    }
