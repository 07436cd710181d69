"""RBAC is enforced: identities other than the admin get exactly what their bindings allow.

Cases:
- a ServiceAccount token (TokenRequest) bound to a Role that may only get/list ConfigMaps in its
  namespace can list them there, gets 403 for ConfigMaps of another namespace, 403 for Nodes,
  and 403 for patching ClusterQueues;
- once a ClusterRole + ClusterRoleBinding grant it `patch` on ClusterQueues, the same token can
  merge-patch one (the pattern the actuator's RBAC tests follow);
- impersonation: the admin acting as an unbound user is forbidden; acting as that user in
  `system:masters` is allowed;
- a made-up bearer token is 401.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.k8s


def eventually(call, timeout_s: float = 10.0):
    """RBAC changes reach the authorizer through an informer: allow it a moment to catch up."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except ApiException as exc:
            if exc.status != 403 or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def status_of(call) -> int:
    with pytest.raises(ApiException) as err:
        call()
    return err.value.status


def test_narrow_role_token_is_forbidden_outside_it(k8s_cluster, k8s_namespace):
    ns = k8s_namespace
    sa = "reader"
    with k8s_cluster.api_client() as admin:
        core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
        other = f"other-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": other}})
        core.create_namespaced_config_map(ns, {"metadata": {"name": "mine"}, "data": {"a": "1"}})
        core.create_namespaced_config_map(other, {"metadata": {"name": "theirs"}})
        rbac.create_namespaced_role(ns, {
            "metadata": {"name": "cm-reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        })
        rbac.create_namespaced_role_binding(ns, {
            "metadata": {"name": "cm-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        })
        crs = client.CustomObjectsApi(admin)
        cq = f"cq-rbac-{uuid.uuid4().hex[:6]}"
        crs.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
            "spec": {"namespaceSelector": {}},
        })
    with k8s_cluster.service_account_client(ns, sa) as api:
        core, crs = client.CoreV1Api(api), client.CustomObjectsApi(api)
        names = [cm.metadata.name for cm in eventually(lambda: core.list_namespaced_config_map(ns)).items]
        assert "mine" in names
        assert status_of(lambda: core.list_namespaced_config_map(other)) == 403
        assert status_of(lambda: core.read_namespaced_config_map("theirs", other)) == 403
        assert status_of(lambda: core.patch_namespaced_config_map("mine", ns, {"data": {"a": "2"}})) == 403
        assert status_of(core.list_node) == 403
        patch = {"spec": {"cohortName": "x"}}
        merge = "application/merge-patch+json"
        assert status_of(lambda: crs.patch_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, patch, _content_type=merge)) == 403
        # Grant exactly patch on ClusterQueues, as a deploy/ ClusterRole would.
        with k8s_cluster.api_client() as admin:
            rbac = client.RbacAuthorizationV1Api(admin)
            role = f"cq-patcher-{ns}"[:63]
            rbac.create_cluster_role({"metadata": {"name": role}, "rules": [{
                "apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "patch"]}]})
            rbac.create_cluster_role_binding({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
            })
        patched = eventually(lambda: crs.patch_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, patch, _content_type=merge))
        assert patched["spec"]["cohortName"] == "x"
        assert status_of(lambda: crs.delete_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq)) == 403


def test_impersonation_and_bad_token(k8s_cluster):
    with k8s_cluster.api_client(impersonate="jane") as api:
        assert status_of(lambda: client.CoreV1Api(api).list_node()) == 403
    with k8s_cluster.api_client(impersonate="jane", group="system:masters") as api:
        client.CoreV1Api(api).list_node()
    with k8s_cluster.api_client(token="not-a-token") as api:
        assert status_of(lambda: client.CoreV1Api(api).list_namespace()) == 401
