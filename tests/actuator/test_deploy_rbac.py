"""deploy/: the RBAC rules let the actuator work as its ServiceAccount and refuse it elsewhere.

Cases (deploy/rbac.yaml applied to the real kube-apiserver, RBAC authorization on):
- as `gpuledger` (real TokenRequest token): a MIG plan (MIG Manager's ConfigMap in
  gpu-operator, cordon, eviction, label, uncordon) and a quota plan are applied end to end;
- the same token is refused (ForbiddenError) for another ConfigMap in gpu-operator, a ConfigMap
  elsewhere, deleting a Node, creating a Pod, and patching a Kueue LocalQueue;
- as `gpuledger-collector`: reads work, but applying a quota plan is refused at the first
  (dry-run) write, nothing changes and the plan is `failed`;
- every other manifest in deploy/ (namespace, config, dashboard Deployment + Service, collection
  and report CronJobs) is accepted by the API server in a dry-run create, and kustomization.yaml
  lists every manifest file of deploy/.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from gpuledger.actuator.gateway import ClusterGateway, RetryPolicy, configmap_ref
from gpuledger.actuator.workflow import apply, approve
from gpuledger.core.access import resolve_roles
from gpuledger.core.errors import ForbiddenError
from gpuledger.optimizer.plan.contract import PodRef
from gpuledger.optimizer.plan.store import load_record, save_plan
from tests.actuator.conftest import make_settings
from tests.actuator.helpers import (
    CONFIG_LABEL,
    KUEUE,
    cluster_queue_manifest,
    configmap_manifest,
    mig_node_change,
    mig_plan,
    node_manifest,
    pod_manifest,
    qc,
    quota_plan,
    uid,
)
from tools.kube_loader import load_manifests
from tools.mig_manager_emulator import MigBehavior, MigManagerEmulator

pytestmark = pytest.mark.k8s

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OPERATOR_NS, CONFIGMAP = "gpu-operator", "default-mig-parted-config"


def docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


@pytest.fixture(scope="module")
def installed(k8s_cluster):
    """deploy/namespace.yaml + rbac.yaml in the cluster, with gpu-operator and its ConfigMap."""
    with k8s_cluster.api_client() as api:
        load_manifests(api, [
            *docs("namespace.yaml"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}},
            *docs("rbac.yaml"),
            configmap_manifest(OPERATOR_NS, CONFIGMAP, {"all-disabled": [{"devices": "all", "mig-enabled": False}]}),
        ])
    return k8s_cluster


def sa_gateway(cluster, name: str) -> ClusterGateway:
    token = cluster.service_account_token("gpuledger", name, create=False)
    return ClusterGateway(cluster.api_client(token), retry=RetryPolicy(attempts=2, base_s=0.05))


def settle(gateway: ClusterGateway) -> None:
    """RBAC objects reach the authorizer through an informer: wait until a granted read works."""
    deadline = time.monotonic() + 10
    while True:
        try:
            gateway.get(configmap_ref(OPERATOR_NS, CONFIGMAP))
            return
        except ForbiddenError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_actuator_works_as_its_service_account(installed, kube, wh, created_nodes, k8s_namespace):
    settings = make_settings(OPERATOR_NS, CONFIGMAP)
    alice = resolve_roles("alice", [], settings.access)
    ns, node, queue = k8s_namespace, uid("gpu-rbac"), uid("q-rbac")
    created_nodes.append(node)
    load_manifests(kube.api, [node_manifest(node), pod_manifest(ns, "job", node),
                              cluster_queue_manifest(queue, {"nvidia.com/gpu": 8}, cohort=uid("c"))])
    mig = mig_plan(kube, [mig_node_change(node, uid("rbac-3g"), "3g.40gb", 2,
                                          pods=(PodRef(namespace=ns, pod="job", gpu_index=0),))])
    quota = quota_plan(kube, [qc(queue, 8, 6)])
    for plan in (mig, quota):
        save_plan(wh, plan)
        approve(wh, plan.id, principal=alice, settings=settings)
    with (
        installed.api_client() as admin_api,
        MigManagerEmulator(admin_api, settings.kubernetes, MigBehavior(delay_s=0.1)),
        sa_gateway(installed, "gpuledger") as gateway,
    ):
        settle(gateway)
        for plan in (mig, quota):  # the preview the approval policy wants, as the same account
            assert apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True).ok
        assert apply(wh, mig.id, principal=alice, settings=settings, cluster=gateway).status == "applied"
        assert apply(wh, quota.id, principal=alice, settings=settings, cluster=gateway).status == "applied"
    assert kube.labels(node)[CONFIG_LABEL] == mig.changes.nodes[0].mig_config
    assert not kube.pod_exists(ns, "job")
    assert kube.quotas(queue)[("h100", "nvidia.com/gpu")] == 6
    kube.custom.delete_cluster_custom_object(*KUEUE[:2], KUEUE[2], queue)


def test_service_account_is_refused_outside_its_rules(installed, kube, k8s_namespace, created_nodes):
    ns, node = k8s_namespace, uid("gpu-deny")
    created_nodes.append(node)
    load_manifests(kube.api, [
        node_manifest(node),
        configmap_manifest(OPERATOR_NS, uid("other-config"), {}),
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "x"}},
    ])
    other = kube.core.list_namespaced_config_map(OPERATOR_NS).items
    other_name = next(cm.metadata.name for cm in other if cm.metadata.name != CONFIGMAP)
    with sa_gateway(installed, "gpuledger") as gateway:
        settle(gateway)
        rv = gateway.get_node(node)["metadata"]["resourceVersion"]  # reads are granted
        refused = {
            "other ConfigMap": lambda: gateway.patch(configmap_ref(OPERATOR_NS, other_name), {"data": {"a": "1"}}, "1"),
            "ConfigMap elsewhere": lambda: gateway.get(configmap_ref(ns, "kube-root-ca.crt")),
            "delete Node": lambda: gateway.request("DELETE", f"/api/v1/nodes/{node}", what=f"delete Node/{node}"),
            "create Pod": lambda: gateway.request("POST", f"/api/v1/namespaces/{ns}/pods", what="create Pod",
                                                  body=pod_manifest(ns, "intruder", node)),
            "patch LocalQueue": lambda: gateway.request(
                "PATCH", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/lq", what="patch LocalQueue",
                body={"spec": {"clusterQueue": "y"}}, content_type="application/merge-patch+json"),
        }
        for what, call in refused.items():
            with pytest.raises(ForbiddenError):
                call()
            assert what  # each case named for the failure message
    assert kube.node(node)["metadata"]["resourceVersion"] == rv


def test_collector_account_can_read_but_not_apply(installed, kube, wh):
    settings = make_settings(OPERATOR_NS, CONFIGMAP)
    alice = resolve_roles("alice", [], settings.access)
    queue = uid("q-collector")
    load_manifests(kube.api, [cluster_queue_manifest(queue, {"nvidia.com/gpu": 8}, cohort=None)])
    plan = quota_plan(kube, [qc(queue, 8, 4)])
    save_plan(wh, plan)
    approve(wh, plan.id, principal=alice, settings=settings)
    with ClusterGateway(installed.api_client()) as admin_gateway:  # an admin previewed it
        assert apply(wh, plan.id, principal=alice, settings=settings, cluster=admin_gateway, dry_run=True).ok
    before = kube.cq(queue)["metadata"]["resourceVersion"]
    with sa_gateway(installed, "gpuledger-collector") as gateway:
        deadline = time.monotonic() + 10
        while True:  # wait for the binding to reach the authorizer
            try:
                gateway.get_cluster_queue(queue)
                break
            except ForbiddenError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with pytest.raises(ForbiddenError, match=f"ClusterQueue/{queue} \\(dry run\\): HTTP 403"):
            apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert kube.cq(queue)["metadata"]["resourceVersion"] == before
    assert load_record(wh, plan.id).status == "failed"
    kube.custom.delete_cluster_custom_object(*KUEUE[:2], KUEUE[2], queue)


PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ConfigMap": "/api/v1/namespaces/gpuledger/configmaps",
    "PersistentVolumeClaim": "/api/v1/namespaces/gpuledger/persistentvolumeclaims",
    "Deployment": "/apis/apps/v1/namespaces/gpuledger/deployments",
    "Service": "/api/v1/namespaces/gpuledger/services",
    "CronJob": "/apis/batch/v1/namespaces/gpuledger/cronjobs",
}


@pytest.mark.parametrize(
    "name", ["namespace.yaml", "config.yaml", "dashboard.yaml", "cronjob-collect.yaml", "cronjob-report.yaml"])
def test_other_manifests_pass_server_validation(installed, name):
    with ClusterGateway(installed.api_client()) as admin:
        for manifest in docs(name):
            path = PATHS[manifest["kind"]]
            doc = manifest
            if doc["kind"] == "Namespace":
                doc = {**doc, "metadata": {**doc["metadata"], "name": uid("dryrun")}}
            answer = admin.request("POST", path, what=f"create {doc['kind']}", query={"dryRun": "All"}, body=doc)
            assert answer["kind"] == doc["kind"]


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present
