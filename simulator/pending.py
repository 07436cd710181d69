"""Pending workloads with the statuses their controllers write: one per class of `gpuledger why`.

Why a scenario of its own: every class of `analytics.waiting.why` must be met in a real
kube-apiserver (tests) and in the demo, with the objects written as upstream writes them:
- pods: `status.conditions[PodScheduled]` `False`/`Unschedulable` with kube-scheduler's message
  (`0/N nodes are available: ...`; kubernetes/kubernetes `pkg/scheduler/schedule_one.go`
  `FitError.Error`, `noderesources/fit.go` `Insufficient <resource>`, `nodeaffinity`
  `node(s) didn't match Pod's node affinity/selector`, `dynamicresources`
  `cannot allocate all claims`) and a `FailedScheduling` event, `status.nominatedNodeName` for a
  preemptor;
- Kueue Workloads (`kueue.x-k8s.io/v1beta2`, `apis/kueue/v1beta2/workload_types.go`):
  `QuotaReserved=False` reason `Pending` with the flavor assigner's message
  (`pkg/scheduler/flavorassigner/flavorassigner.go`), `Evicted=True` reason `Preempted`;
  ClusterQueues with `status.flavorsReservation`;
- Volcano PodGroups (`scheduling.volcano.sh/v1beta1`): condition `Unschedulable` with reason
  `NotEnoughResources` or `NotInqueueable` (volcano-sh/website
  `content/en/docs/podgroup-condition-reason.md`).

The fleet: node `<p>-mig-0` (one A100 80GB: 1g + 2g + 3g instances, all held), node `<p>-mig-1`
(one A100 80GB: four 1g, two held: a 3g would fit beside them), node `<p>-full` (eight whole
A100s, all requested). `cards()` gives the MIG cards as the collectors would store them.
Kueue: ClusterQueues `<p>-research` (4 GPUs, all reserved) and `<p>-vision` (4, using 6: it
borrows) share cohort `<p>-lab`; `<p>-spare` (4, none used) is another cohort's, reachable from
the namespace through LocalQueue `spare`. `EXPECTED` is the ground truth: the class each object
must get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MODEL = "A100-80GB"
PRODUCT = "NVIDIA-A100-SXM4-80GB"
KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
TIME = "2026-12-01T08:00:00Z"
SCHEDULER_TIME = "2026-12-01T08:00:05Z"

EXPECTED: dict[str, str] = {
    "Pod/frag-3g": "stranded by fragmentation",
    "Pod/full-gpu": "no capacity of that shape",
    "Pod/h200-only": "never satisfiable",
    "Pod/unknown-profile": "never satisfiable",
    "Pod/preemptor": "priority / preemption",
    "Pod/dra-claim": "no capacity of that shape",
    "Workload/wl-quota": "quota exhausted",
    "Workload/wl-too-big": "never satisfiable",
    "Workload/wl-fraction": "never satisfiable",
    "Workload/wl-preempted": "priority / preemption",
    "PodGroup/pg-queue": "quota exhausted",
    "PodGroup/pg-gang": "no capacity of that shape",
}
"""`kind/name` → the class `gpuledger why` must give it."""


@dataclass(frozen=True, slots=True)
class Card:
    node: str
    uuid: str
    instances: Mapping[str, int]
    held: Mapping[str, int]


def cards(prefix: str) -> list[Card]:
    """The scenario's MIG cards with their instances and the ones pods hold."""
    return [
        Card(f"{prefix}-mig-0", f"GPU-{prefix}-0", {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1},
             {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}),
        Card(f"{prefix}-mig-1", f"GPU-{prefix}-1", {"1g.10gb": 4}, {"1g.10gb": 2}),
    ]


def _node(name: str, capacity: dict[str, str], mig: bool) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": PRODUCT,
              "nvidia.com/gpu.count": "1" if mig else capacity.get("nvidia.com/gpu", "0"),
              "gpuledger.io/pool": "train"}
    if mig:
        labels |= {"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "custom",
                   "nvidia.com/mig.config.state": "success"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _scheduled_false(message: str) -> dict[str, Any]:
    return {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        "lastTransitionTime": SCHEDULER_TIME}]}


def _pod(ns: str, name: str, limits: dict[str, str], status: dict[str, Any], *,
         selector: dict[str, str] | None = None, claims: Sequence[str] = (), node: str | None = None,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                 "resources": {"limits": limits} if limits else {}}
    if claims:
        container["resources"]["claims"] = [{"name": c} for c in claims]
    spec: dict[str, Any] = {"containers": [container]}
    if selector:
        spec["nodeSelector"] = selector
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": spec,
            "status": status}


def _event(ns: str, pod: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{pod}.failed-scheduling", "namespace": ns},
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod, "apiVersion": "v1"},
            "reason": "FailedScheduling", "message": message, "type": "Warning",
            "source": {"component": "default-scheduler"}, "count": 3,
            "firstTimestamp": SCHEDULER_TIME, "lastTimestamp": SCHEDULER_TIME}


def _workload(ns: str, name: str, queue: str, *, count: int, gpus: str,
              conditions: list[dict[str, Any]]) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}}]}}
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": template}]},
            "status": {"conditions": [{"lastTransitionTime": TIME, **c} for c in conditions]}}


def _flavor_usage(flavor: str, total: int, borrowed: int) -> list[dict[str, Any]]:
    return [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "total": str(total),
                                            "borrowed": str(borrowed)}]}]


def _cluster_queue(name: str, cohort: str, flavor: str, nominal: int, used: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": cohort, "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu",
                                                            "nominalQuota": nominal}]}]}]},
            "status": {"flavorsReservation": _flavor_usage(flavor, used, max(0, used - nominal)),
                       "flavorsUsage": _flavor_usage(flavor, used, max(0, used - nominal))}}


def _podgroup(ns: str, name: str, *, queue: str, phase: str, members: int, reason: str,
              message: str) -> dict[str, Any]:
    return {"apiVersion": VOLCANO, "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": members, "queue": queue,
                     "minResources": {"nvidia.com/gpu": str(members)}},
            "status": {"phase": phase, "conditions": [{
                "type": "Unschedulable", "status": "True", "reason": reason, "message": message,
                "lastTransitionTime": TIME, "transitionID": "0"}]}}


def _nodes_msg(n: int, *parts: str) -> str:
    return (f"0/{n} nodes are available: {', '.join(parts)}. preemption: 0/{n} nodes are available: "
            f"{n} No preemption victims found for incoming pod.")


def manifests(prefix: str, ns: str, *, team: str = "nlp", volcano: bool = True,
              local_queue: str = "research") -> list[dict[str, Any]]:
    """Every object of the scenario (module docstring), its namespace labelled `team: <team>`,
    its workloads submitted to LocalQueue `local_queue`; `volcano=False` leaves PodGroups out
    (a cluster without Volcano's CRDs)."""
    flavor = f"{prefix}-a100"
    out = _cluster(prefix, ns, team, local_queue) + _pods(prefix, ns) + _workloads(ns, local_queue, flavor)
    if volcano:
        out += [
            _podgroup(ns, "pg-queue", queue=local_queue, phase="Pending", members=2,
                      reason="NotInqueueable", message="queue resource quota insufficient"),
            _podgroup(ns, "pg-gang", queue=local_queue, phase="Inqueue", members=4,
                      reason="NotEnoughResources", message=
                      "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
                      "Pending: 4 Unschedulable"),
        ]
    return out


def _cluster(prefix: str, ns: str, team: str, local_queue: str) -> list[dict[str, Any]]:
    """The namespace, the three nodes with the pods that hold their devices, Kueue's objects."""
    mig0, mig1, full = f"{prefix}-mig-0", f"{prefix}-mig-1", f"{prefix}-full"
    flavor, cohort = f"{prefix}-a100", f"{prefix}-lab"
    research = f"{prefix}-research"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": team}}},
        _node(mig0, {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-2g.20gb": "1",
                     "nvidia.com/mig-3g.40gb": "1"}, True),
        _node(mig1, {"nvidia.com/mig-1g.10gb": "4"}, True),
        _node(full, {"nvidia.com/gpu": "8"}, False),
        _pod(ns, "holder", {"nvidia.com/gpu": "8"}, {"phase": "Running"}, node=full),
        _pod(ns, "holder-mig-0", {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-2g.20gb": "1",
                                  "nvidia.com/mig-3g.40gb": "1"}, {"phase": "Running"}, node=mig0),
        _pod(ns, "holder-mig-1", {"nvidia.com/mig-1g.10gb": "2"}, {"phase": "Running"}, node=mig1),
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": {"gpuledger.io/pool": "train"}}},
        _cluster_queue(research, cohort, flavor, 4, 4),
        _cluster_queue(f"{prefix}-vision", cohort, flavor, 4, 6),
        _cluster_queue(f"{prefix}-spare", f"{prefix}-other", flavor, 4, 0),
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": ns},
         "spec": {"clusterQueue": research}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "spare", "namespace": ns},
         "spec": {"clusterQueue": f"{prefix}-spare"}},
    ]


def _pods(prefix: str, ns: str) -> list[dict[str, Any]]:
    """The pending pods with their scheduler statuses and events, and the unallocated claim."""
    three = "nvidia.com/mig-3g.40gb"
    cases: list[tuple[str, dict[str, str], str, dict[str, Any]]] = [
        ("frag-3g", {three: "1"},
         _nodes_msg(3, f"2 Insufficient {three}", "1 Insufficient nvidia.com/gpu"), {}),
        ("full-gpu", {"nvidia.com/gpu": "2"}, _nodes_msg(3, "3 Insufficient nvidia.com/gpu"), {}),
        ("h200-only", {"nvidia.com/gpu": "1"},
         _nodes_msg(3, "3 node(s) didn't match Pod's node affinity/selector"),
         {"selector": {"nvidia.com/gpu.product": "NVIDIA-H200"}}),
        ("unknown-profile", {"nvidia.com/mig-5g.50gb": "1"},
         _nodes_msg(3, "3 Insufficient nvidia.com/mig-5g.50gb"), {}),
        ("dra-claim", {}, _nodes_msg(3, "3 cannot allocate all claims"), {"claims": ["dra-claim-gpu"]}),
    ]
    out: list[dict[str, Any]] = []
    for name, limits, message, extra in cases:
        out.append(_pod(ns, name, limits, _scheduled_false(message), **extra))
        out.append(_event(ns, name, message))
    preemptor = _scheduled_false(_nodes_msg(3, "3 Insufficient nvidia.com/gpu"))
    preemptor["nominatedNodeName"] = f"{prefix}-full"
    out.append(_pod(ns, "preemptor", {"nvidia.com/gpu": "1"}, preemptor))
    out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "dra-claim-gpu", "namespace": ns},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.nvidia.com"}}]}}})
    return out


def _workloads(ns: str, local_queue: str, flavor: str) -> list[dict[str, Any]]:
    """The Kueue Workloads that wait, with the conditions Kueue writes."""
    pending = {"type": "QuotaReserved", "status": "False", "reason": "Pending"}
    assign = "couldn't assign flavors to pod set main: "
    return [
        _workload(ns, "wl-quota", local_queue, count=2, gpus="1", conditions=[{**pending, "message": (
            f"{assign}insufficient unused quota for nvidia.com/gpu in flavor {flavor}, 2 more needed")}]),
        _workload(ns, "wl-too-big", local_queue, count=1, gpus="16", conditions=[{**pending, "message": (
            f"{assign}insufficient quota for nvidia.com/gpu in flavor {flavor}, request > maximum "
            "capacity (16 > 8)")}]),
        _workload(ns, "wl-fraction", local_queue, count=1, gpus="500m", conditions=[{**pending, "message": (
            f"{assign}insufficient unused quota for nvidia.com/gpu in flavor {flavor}, 500m more needed")}]),
        _workload(ns, "wl-preempted", local_queue, count=1, gpus="1", conditions=[
            {"type": "Evicted", "status": "True", "reason": "Preempted",
             "message": "Preempted to accommodate a workload (UID: 5c3f, JobUID: 9a1e) due to "
                        "reclamation within the cohort"},
            {**pending, "message": "Workload was preempted; waiting to be requeued"}]),
    ]
