"""Builders for the actuator tests: cluster objects as manifests, plans as the optimizer makes them.

Fingerprints are computed here from the definition documented in `optimizer.plan.contract.ObservedObject`
(a Node's `mig.config` label; a ClusterQueue's cohortName and resourceGroups), read back from
the API with the typed client, independently of the actuator's own fingerprint module.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import yaml
from kubernetes import client

from gpuledger.optimizer.plan.contract import (
    ClusterQueueUpdate,
    Effect,
    GpuChange,
    GpuConfig,
    MigChanges,
    MigPartedGroup,
    NodeMigChange,
    ObservedObject,
    Plan,
    PodRef,
    QuotaChange,
    QuotaChanges,
    SolverInfo,
    fingerprint_of,
    state_hash,
)

H100 = "NVIDIA-H100-80GB-HBM3"
MERGE = "application/merge-patch+json"
CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
KUEUE = ("kueue.x-k8s.io", "v1beta2", "clusterqueues")


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# 1. Manifests ----------------------------------------------------------------------------------
def node_manifest(name: str, *, config: str = "all-disabled", gpus: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/mig.strategy": "mixed", CONFIG_LABEL: config, STATE_LABEL: "success",
        }},
        "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": str(gpus)},
                   "allocatable": {"cpu": "63", "nvidia.com/gpu": str(gpus)}},
    }


def pod_manifest(namespace: str, name: str, node: str, *, running: bool = False,
                 labels: dict[str, str] | None = None, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {
            "nodeName": node, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.example/cuda:12",
                            "resources": {"limits": {resource: "1"}, "requests": {resource: "1"}}}],
        },
    }
    if running:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        manifest["status"] = {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}
    return manifest


def blocking_pdb(namespace: str, name: str, app: str) -> dict[str, Any]:
    """A PDB whose status (as the disruption controller would write it) allows no disruption."""
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
                   "desiredHealthy": 1, "expectedPods": 1},
    }


def configmap_manifest(namespace: str, name: str, configs: dict[str, Any]) -> dict[str, Any]:
    doc = {"version": "v1", "mig-configs": configs}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"config.yaml": yaml.safe_dump(doc)}}


def cluster_queue_manifest(name: str, quotas: dict[str, int], *, cohort: str | None,
                           flavor: str = "h100") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": list(quotas),
            "flavors": [{"name": flavor, "resources": [
                {"name": r, "nominalQuota": q} for r, q in quotas.items()]}],
        }],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


# 2. Reading back ---------------------------------------------------------------------------------
class Kube:
    """Typed-client reads and writes for setting up and checking (admin identity)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def node(self, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_node(name))

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.core.read_node(name).metadata.labels or {})

    def unschedulable(self, name: str) -> bool:
        return bool(self.core.read_node(name).spec.unschedulable)

    def set_label(self, node: str, key: str, value: str | None) -> None:
        self.core.patch_node(node, {"metadata": {"labels": {key: value}}}, _content_type=MERGE)

    def pod_exists(self, namespace: str, name: str) -> bool:
        try:
            self.core.read_namespaced_pod(name, namespace)
        except client.exceptions.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def mig_configs(self, namespace: str, name: str) -> dict[str, Any]:
        cm = self.core.read_namespaced_config_map(name, namespace)
        return yaml.safe_load(cm.data["config.yaml"])["mig-configs"]

    def cq(self, name: str) -> dict[str, Any]:
        return self.custom.get_cluster_custom_object(*KUEUE[:2], KUEUE[2], name)

    def quotas(self, name: str) -> dict[tuple[str, str], Any]:
        out = {}
        for group in self.cq(name)["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    out[(flavor["name"], res["name"])] = res["nominalQuota"]
        return out

    def patch_cq(self, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_cluster_custom_object(*KUEUE[:2], KUEUE[2], name, patch, _content_type=MERGE)

    def delete_nodes(self, names: list[str]) -> None:
        for name in names:
            with contextlib.suppress(client.exceptions.ApiException):
                self.core.delete_node(name)


def wait_until(predicate: Any, timeout_s: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


# 3. Plans ------------------------------------------------------------------------------------------
def _solver() -> SolverInfo:
    return SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30)


def _observed_node(kube: Kube, name: str) -> ObservedObject:
    meta = kube.core.read_node(name).metadata
    return ObservedObject(kind="Node", name=name, resource_version=meta.resource_version,
                          state=state_hash({"mig.config": (meta.labels or {}).get(CONFIG_LABEL)}))


def _observed_cq(kube: Kube, name: str) -> ObservedObject:
    obj = kube.cq(name)
    spec = obj["spec"]
    state = state_hash({"cohortName": spec.get("cohortName"), "resourceGroups": spec.get("resourceGroups") or []})
    return ObservedObject(kind="ClusterQueue", name=name, resource_version=obj["metadata"]["resourceVersion"],
                          state=state)


def mig_node_change(node: str, config: str, profile: str, count: int, *, pods: tuple[PodRef, ...] = (),
                    previous: str = "all-disabled", gpus: int = 2) -> NodeMigChange:
    after = GpuConfig(mig_enabled=True, mig_devices={profile: count})
    return NodeMigChange(
        node=node, model="H100-80GB", mig_config=config, previous_mig_config=previous,
        mig_parted=(MigPartedGroup(devices=tuple(range(gpus)), mig_enabled=True, mig_devices={profile: count}),),
        gpus_changed=tuple(GpuChange(index=i, before=GpuConfig(mig_enabled=False), after=after)
                           for i in range(gpus)),
        pods_to_evict=pods,
    )


def mig_plan(kube: Kube, changes: list[NodeMigChange], *, created_at: datetime | None = None) -> Plan:
    observed = tuple(_observed_node(kube, c.node) for c in changes)
    created = created_at or datetime.now(UTC)
    return Plan(
        id=uid("mig"), kind="mig", created_at=created, fingerprint=fingerprint_of(observed),
        observed=observed, changes=MigChanges(nodes=tuple(changes)),
        effect=Effect(gpus_changed=sum(len(c.gpus_changed) for c in changes)), solver=_solver(),
    )


def quota_plan(kube: Kube, changes: list[QuotaChange], *, created_at: datetime | None = None) -> Plan:
    queues = list(dict.fromkeys(c.cluster_queue for c in changes))
    observed = tuple(_observed_cq(kube, q) for q in queues)
    updates = tuple(ClusterQueueUpdate(name=q, resource_groups=tuple(kube.cq(q)["spec"]["resourceGroups"]))
                    for q in queues)
    created = created_at or datetime.now(UTC)
    return Plan(
        id=uid("quota"), kind="quota", created_at=created, fingerprint=fingerprint_of(observed),
        observed=observed, changes=QuotaChanges(quotas=tuple(changes), cluster_queues=updates),
        effect=Effect(), solver=_solver(),
    )


def qc(queue: str, old: float, new: float, *, cohort: str | None = None, flavor: str = "h100",
       resource: str = "nvidia.com/gpu", old_borrow: float | None = None,
       new_borrow: float | None = None) -> QuotaChange:
    return QuotaChange(cluster_queue=queue, cohort=cohort, flavor=flavor, resource=resource,
                       old_nominal=old, new_nominal=new, old_borrowing_limit=old_borrow,
                       new_borrowing_limit=new_borrow)
