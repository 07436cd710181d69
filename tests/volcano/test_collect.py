"""Collecting Volcano and preemption facts from a real kube-apiserver with Volcano's CRDs.

- Queues (flat and hierarchical) and PodGroups are listed beside Kueue's objects, each under
  its own kind; a Queue's cohort is its parent; a PodGroup keeps its status;
- a Volcano Queue's team is the team of the namespaces whose PodGroups submit to it;
- a GPU pod's PriorityClass and value are recorded (the API server's Priority admission fills
  `spec.priority` from the PriorityClass);
- a pod the scheduler preempted (its `DisruptionTarget` condition, reason
  `PreemptionByScheduler`) becomes a `preemptions` row with its own GPUs, start and
  checkpoint; Volcano's `Evict` event on a PodGroup becomes a row naming the PodGroup's
  controller (whose pods are the victims); other pods and events give none;
- a Kueue Workload's `Evicted`/`Preempted` conditions (read as the API returns them).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl
import pytest
from kubernetes import client

from gpuledger.analytics.teams.volcano import volcano_queue_owners
from gpuledger.collectors.kubernetes import KubernetesCollector
from gpuledger.collectors.preemption import workload_rows
from gpuledger.warehouse import LoadBatch
from tests.actuator.helpers import uid

pytestmark = pytest.mark.k8s
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"
AT = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _pod(namespace: str, name: str, *, priority_class: str | None, gpus: int = 2,
         annotations: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels={"volcano.sh/queue-name": "vq"},
                                     annotations=annotations),
        spec=client.V1PodSpec(node_name="gpu-node-x", priority_class_name=priority_class, containers=[
            client.V1Container(name="c", image="x", resources=client.V1ResourceRequirements(
                limits={"nvidia.com/gpu": str(gpus)}))]))


@pytest.fixture
def world(volcano_cluster, k8s_namespace):
    api = volcano_cluster.api_client()
    core, custom, sched = client.CoreV1Api(api), client.CustomObjectsApi(api), client.SchedulingV1Api(api)
    core.patch_namespace(k8s_namespace, {"metadata": {"labels": {"team": "vision"}}})
    parent, child, pc = uid("vroot"), uid("vchild"), uid("train")
    for name, spec in ((parent, {"weight": 2, "capability": {"nvidia.com/gpu": 16}}),
                       (child, {"parent": parent, "deserved": {"nvidia.com/gpu": 4}})):
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": name}, "spec": spec})
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "podgroups", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup",
        "metadata": {"name": "pg-train", "ownerReferences": [
            {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "u-1",
             "controller": True}]},
        "spec": {"queue": child, "minMember": 2, "priorityClassName": pc}})
    sched.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=pc), value=1000))
    core.create_namespaced_pod(k8s_namespace, _pod(k8s_namespace, "victim", priority_class=pc, annotations={
        "gpuledger.io/last-checkpoint": "2026-12-01T11:30:00Z"}))
    core.create_namespaced_pod(k8s_namespace, _pod(k8s_namespace, "bystander", priority_class=None, gpus=1))
    core.patch_namespaced_pod_status("victim", k8s_namespace, {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "lastTransitionTime": "2026-12-01T11:45:00Z", "message": "preempted"}]}})
    for reason, kind, name in (("Evict", "PodGroup", "pg-train"), ("Scheduled", "Pod", "bystander")):
        core.create_namespaced_event(k8s_namespace, client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=uid("ev")), reason=reason, message="m", type="Warning",
            last_timestamp=datetime(2026, 12, 1, 11, 50, tzinfo=UTC),
            involved_object=client.V1ObjectReference(kind=kind, name=name, namespace=k8s_namespace)))
    yield api, k8s_namespace, parent, child, pc
    for name in (child, parent):
        custom.delete_cluster_custom_object(GROUP, VERSION, "queues", name)
    sched.delete_priority_class(pc)
    api.close()


def test_volcano_queues_podgroups_priorities_and_preemptions(world, settings, wh):
    api, ns, parent, child, pc = world
    snap = KubernetesCollector(api, settings, now=lambda: AT, queue_system=("kueue", "volcano")).snapshot()
    queues = snap["queues"].filter(pl.col("name").is_in([parent, child, "pg-train"]))
    by_name = {r["name"]: r for r in queues.iter_rows(named=True)}
    assert (by_name[parent]["kind"], by_name[parent]["cohort"]) == ("Queue", None)
    assert (by_name[child]["kind"], by_name[child]["cohort"]) == ("Queue", parent)
    assert json.loads(by_name[child]["spec"])["deserved"] == {"nvidia.com/gpu": 4}
    assert (by_name["pg-train"]["kind"], by_name["pg-train"]["namespace"]) == ("PodGroup", ns)
    assert json.loads(by_name["pg-train"]["spec"])["queue"] == child
    pods = snap["pods"].filter(pl.col("namespace") == ns)
    assert set(pods["queue"].to_list()) == {"vq"}
    prio = {r["pod"]: (r["priority_class"], r["priority"])
            for r in snap["pod_priorities"].filter(pl.col("namespace") == ns).iter_rows(named=True)}
    assert prio == {"victim": (pc, 1000), "bystander": ("", 0)}
    rows = {r["pod"]: r for r in snap["preemptions"].filter(pl.col("namespace") == ns).iter_rows(named=True)}
    assert set(rows) == {"victim", "pg-train"}
    victim = rows["victim"]
    assert (victim["source"], victim["gpus"], victim["priority_class"]) == ("pod_condition", 2.0, pc)
    assert victim["preempted_at"] == datetime(2026, 12, 1, 11, 45, tzinfo=UTC)
    assert victim["checkpoint_at"] == datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    group = rows["pg-train"]
    assert (group["source"], group["owner_kind"], group["owner_name"]) == ("volcano_podgroup", "Job", "train")
    assert group["preempted_at"] == datetime(2026, 12, 1, 11, 50, tzinfo=UTC)
    wh.load(LoadBatch({"namespaces": snap["namespaces"], "queues": snap["queues"]}))
    assert volcano_queue_owners(wh)[child] == "vision"


def test_kueue_workload_preemption_conditions():
    def workload(name, conds):
        return {"metadata": {"name": name, "namespace": "ml", "ownerReferences": [
            {"kind": "Job", "name": f"job-{name}", "controller": True}]}, "status": {"conditions": conds}}

    rows = workload_rows([
        workload("a", [{"type": "Evicted", "status": "True", "reason": "Preempted",
                        "lastTransitionTime": "2026-12-01T10:00:00Z"}]),
        workload("b", [{"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout"}]),
        workload("c", [{"type": "Preempted", "status": "True", "reason": "InCohortReclamation",
                        "lastTransitionTime": "2026-12-01T09:00:00Z"}]),
        workload("d", [{"type": "Preempted", "status": "False", "reason": "InClusterQueue"}]),
    ], AT)
    assert [(r["pod"], r["owner_name"], r["preempted_at"].hour) for r in rows] == [
        ("a", "job-a", 10), ("c", "job-c", 9)]
    assert {r["source"] for r in rows} == {"kueue_workload"}
