"""The Kubernetes side of the fleet: node labels and capacity, and manifests at an instant.

Labels follow GPU feature discovery (`nvidia.com/gpu.product`, `.count`, `.memory`,
`nvidia.com/mig.strategy`, `nvidia.com/gpu.replicas` and a `-SHARED` product suffix on
time-sliced nodes), the GPU Operator's MIG Manager (`nvidia.com/mig.config` and its `.state`)
and the HAMi chart's default device-plugin node selector (`gpu=on`, an admin's label). Capacity
follows the device plugins: whole cards or replicas as `nvidia.com/gpu`, MIG instances as
`nvidia.com/mig-<profile>` (mixed strategy), HAMi as `nvidia.com/gpu` only (`deviceSplitCount`
per card; HAMi advertises no `nvidia.com/gpumem`/`gpucores`). HAMi's node and pod annotations
and `schedulerName` are `simulator.hami`'s.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpuledger.simulator.fleet import MODEL_FACTS, FleetSpec
from gpuledger.simulator.hami import DEVICE_SPLIT_COUNT, node_annotations, pod_annotations
from gpuledger.simulator.hami_series import pod_cards
from gpuledger.simulator.hardware import Hardware, Node, presence_steps
from gpuledger.simulator.tenants import (
    LOCAL_QUEUES,
    SHARED_QUEUE,
    Tenants,
    cluster_queue_spec,
    nominal_quotas,
)
from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.workloads import CLASSES, Schedule

HAMI_SPLITS = DEVICE_SPLIT_COUNT
MIG_CONFIGMAP = ("gpu-operator", "default-mig-parted-config")
_IMAGES = {"trainer": "nvcr.io/nvidia/pytorch:24.05-py3", "vllm": "vllm/vllm-openai:v0.6.3",
           "notebook": "quay.io/jupyter/pytorch-notebook:cuda12-2024-10-07",
           "evaluator": "nvcr.io/nvidia/pytorch:24.05-py3", "worker": "python:3.12-slim"}
_OWNER_API = {"Job": "batch/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1"}


def mig_config_at(node: Node, k: int) -> str | None:
    for start, end, name in node.mig_epochs:
        if start <= k < end:
            return name
    return node.mig_epochs[-1][2] if node.mig_epochs else None


def node_labels(spec: FleetSpec, hw: Hardware, n_idx: int, k: int) -> dict[str, str]:
    node = hw.nodes[n_idx]
    pool = hw.pools[node.pool]
    facts = MODEL_FACTS[pool.model]
    major, minor, rev = ([*spec.driver_version.split("."), "0", "0"])[:3]
    product = str(facts["product"]) + ("-SHARED" if pool.sharing == "timeslice" else "")
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "gpuledger.io/pool": pool.name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(len(node.gpus)),
        "nvidia.com/gpu.memory": str(int(hw.gpus[node.gpus[0]].memory_mib)),
        "nvidia.com/gpu.family": str(facts["family"]),
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": mig_config_at(node, k) or "all-disabled",
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
    }
    if pool.sharing == "timeslice":
        labels["nvidia.com/gpu.replicas"] = str(pool.replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    if pool.sharing == "vgpu":
        labels["gpu"] = "on"
    return labels


def node_capacity(hw: Hardware, n_idx: int, k: int) -> dict[str, str]:
    node = hw.nodes[n_idx]
    pool = hw.pools[node.pool]
    cards = len(node.gpus)
    out = {"cpu": "192", "memory": "2063937460Ki", "pods": "110", "ephemeral-storage": "3750Gi"}
    if pool.sharing == "exclusive":
        out["nvidia.com/gpu"] = str(cards)
    elif pool.sharing == "timeslice":
        out["nvidia.com/gpu"] = str(cards * pool.replicas)
    elif pool.sharing == "vgpu":
        out["nvidia.com/gpu"] = str(cards * HAMI_SPLITS)
    else:
        out["nvidia.com/gpu"] = "0"
        counts: Counter[str] = Counter()
        for slot in hw.slots:
            if hw.gpus[slot.gpu].node == n_idx and slot.start <= k < slot.end and slot.profile:
                counts[f"nvidia.com/mig-{slot.profile}"] += 1
        out.update({res: str(n) for res, n in sorted(counts.items())})
    return out


def node_allocatable(hw: Hardware, n_idx: int, k: int) -> dict[str, str]:
    return {**node_capacity(hw, n_idx, k), "cpu": "190", "memory": "2053451700Ki"}


def mig_parted_config(spec: FleetSpec) -> dict[str, Any]:
    """The mig-parted config (`version: v1`, `mig-configs`) naming every pool's layouts."""
    configs: dict[str, Any] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for pool in spec.pools:
        for name, counts in pool.mig_configs.items():
            configs[name] = [{"devices": "all", "mig-enabled": True,
                              "mig-devices": {p: c for p, c in counts.items() if c}}]
    return {"version": "v1", "mig-configs": configs}


def manifests(
    spec: FleetSpec, hw: Hardware, tenants: Tenants, sched: Schedule, tb: Timebase, *, k: int
) -> list[dict[str, Any]]:
    """Namespaces, the mig-parted ConfigMap, Nodes and the Pods running at step `k`."""
    import yaml

    out: list[dict[str, Any]] = []
    for name in ("gpu-operator",):
        out.append({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
    for ns in tenants.namespaces:
        out.append({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns.name, "labels": ns.labels}})
    out.append({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": MIG_CONFIGMAP[1], "namespace": MIG_CONFIGMAP[0]},
        "data": {"config.yaml": yaml.safe_dump(mig_parted_config(spec), sort_keys=False)},
    })
    spans = presence_steps(hw, tb)
    handshake = tb.at(k).strftime("%Y-%m-%d %H:%M:%S")
    for n_idx, node in enumerate(hw.nodes):
        meta: dict[str, Any] = {"name": node.name, "labels": node_labels(spec, hw, n_idx, k)}
        if hw.pools[node.pool].sharing == "vgpu":
            meta["annotations"] = node_annotations(hw, n_idx, k, spans, handshake)
        out.append({
            "apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {},
            "status": {"capacity": node_capacity(hw, n_idx, k),
                       "allocatable": node_allocatable(hw, n_idx, k)},
        })
    pods = sched.pods
    cards = pod_cards(sched, hw)
    for p in range(len(pods)):
        if not pods.start[p] <= k < pods.end[p]:
            continue
        out.append(pod_manifest(hw, tenants, sched, tb, p, card=int(cards[p])))
    return out


def pod_manifest(
    hw: Hardware, tenants: Tenants, sched: Schedule, tb: Timebase, p: int, *, card: int = -1,
) -> dict[str, Any]:
    """A pod as the API returns it; a vGPU pod (`card`: the card HAMi placed it on) with HAMi's
    `schedulerName` and allocation annotations."""
    pods = sched.pods
    container = CLASSES[pods.cls[p]].container
    requests = {r: str(v) for r, v in pods.requests[p].items()}
    owner_uid = _owner_uid(pods.uid[p])
    started = tb.at(max(pods.start[p], 0))
    meta: dict[str, Any] = {
        "name": pods.name[p],
        "namespace": tenants.namespaces[pods.namespace[p]].name,
        "labels": dict(pods.labels[p]),
        "ownerReferences": [{
            "apiVersion": _OWNER_API[pods.owner_kind[p]], "kind": pods.owner_kind[p],
            "name": pods.owner_name[p], "uid": owner_uid, "controller": True,
            "blockOwnerDeletion": True,
        }],
    }
    extra: dict[str, Any] = {}
    allocated = pods.hami[p]
    if allocated is not None and card >= 0:
        node = hw.nodes[pods.node[p]].name
        meta["annotations"] = pod_annotations(hw.gpus[card].uuid, allocated, node, int(started.timestamp()))
        extra["schedulerName"] = "hami-scheduler"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": meta,
        "spec": {
            **extra,
            "nodeName": hw.nodes[pods.node[p]].name,
            "restartPolicy": "Never" if pods.owner_kind[p] == "Job" else "Always",
            "containers": [{
                "name": container, "image": _IMAGES[container],
                "resources": {"requests": requests, "limits": dict(requests)},
            }],
        },
        "status": {"phase": "Running", "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }


def _owner_uid(uid: str) -> str:
    return uid[::-1].replace("-", "")[:8] + uid[8:]


def kueue_manifests(spec: FleetSpec, tenants: Tenants) -> list[dict[str, Any]]:
    """ResourceFlavors (one per pool), ClusterQueues (one per team + shared), LocalQueues."""
    api = "kueue.x-k8s.io/v1beta2"
    quotas = nominal_quotas(spec, tenants)
    out: list[dict[str, Any]] = [
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": pool.name},
         "spec": {"nodeLabels": {"gpuledger.io/pool": pool.name}}}
        for pool in spec.pools
    ]
    weights = {**tenants.team_weights, SHARED_QUEUE: 0.5}
    for cq in tenants.cluster_queues():
        out.append({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": cq},
                    "spec": cluster_queue_spec(spec, quotas, cq, weights[cq])})
    for ns in tenants.namespaces:
        if ns.serving:
            continue
        for lq in LOCAL_QUEUES:
            out.append({"apiVersion": api, "kind": "LocalQueue",
                        "metadata": {"name": lq, "namespace": ns.name},
                        "spec": {"clusterQueue": ns.cluster_queue}})
    return out
