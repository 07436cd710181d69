"""The loader puts simulator-shaped manifests into the real cluster, status included.

Cases:
- Namespaces, a Node with GPU capacity and a Running Pod bound to it are created even when the
  list names the Pod first; the Pod's phase/IP and the Node's capacity survive (status
  subresource), labels are kept;
- loading the same list again skips everything (`on_exists="skip"`) or raises ClusterError
  naming the object (`on_exists="error"`);
- a kind the server does not serve and a manifest without a name are InputErrors;
- a Kueue ClusterQueue (a custom resource) loads like any other kind.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from gpuledger.core.errors import ClusterError, InputError
from tools.kube_loader import load_manifests, ordered

pytestmark = pytest.mark.k8s


def manifests(suffix: str) -> list[dict]:
    ns, node = f"team-a-{suffix}", f"node-{suffix}"
    return [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "train-0", "namespace": ns, "labels": {"team": "a"}},
         "spec": {"nodeName": node, "containers": [{
             "name": "main", "image": "registry.invalid/train:1",
             "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]},
         "status": {"phase": "Running", "podIP": "10.1.2.3", "hostIP": "10.0.0.5"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": node, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                               "nvidia.com/gpu.count": "8"}},
         "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "96"},
                    "allocatable": {"nvidia.com/gpu": "8", "cpu": "95"}}},
    ]


def test_ordering_puts_namespaces_first():
    kinds = [m["kind"] for m in ordered(manifests("x"))]
    assert kinds == ["Namespace", "Node", "Pod"]


def test_load_creates_objects_with_status(k8s_cluster):
    suffix = uuid.uuid4().hex[:8]
    with k8s_cluster.api_client() as api:
        report = load_manifests(api, manifests(suffix))
        assert report.created == {"Namespace": 1, "Node": 1, "Pod": 1}
        assert report.status_written.get("Pod") == 1
        core = client.CoreV1Api(api)
        pod = core.read_namespaced_pod("train-0", f"team-a-{suffix}")
        assert pod.status.phase == "Running"
        assert pod.status.pod_ip == "10.1.2.3"
        assert pod.spec.node_name == f"node-{suffix}"
        assert pod.metadata.labels == {"team": "a"}
        node = core.read_node(f"node-{suffix}")
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["cpu"] == "95"
        assert core.read_namespace(f"team-a-{suffix}").metadata.labels["team"] == "a"

        again = load_manifests(api, manifests(suffix))
        assert again.created == {}
        assert again.skipped == {"Namespace": 1, "Node": 1, "Pod": 1}
        with pytest.raises(ClusterError, match=f"Namespace team-a-{suffix}.*409"):
            load_manifests(api, manifests(suffix), on_exists="error")


def test_bad_manifests(k8s_cluster):
    with k8s_cluster.api_client() as api:
        with pytest.raises(InputError, match="does not serve"):
            load_manifests(api, [{"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}}])
        with pytest.raises(InputError, match=r"metadata\.name"):
            load_manifests(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {}}])


def test_custom_resources_load(k8s_cluster):
    name = f"cq-{uuid.uuid4().hex[:8]}"
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
          "spec": {"namespaceSelector": {}, "cohortName": "research"}}
    with k8s_cluster.api_client() as api:
        assert load_manifests(api, [cq]).created == {"ClusterQueue": 1}
        stored = client.CustomObjectsApi(api).get_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", name)
        assert stored["spec"]["cohortName"] == "research"
