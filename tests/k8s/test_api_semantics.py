"""The test cluster is a real kube-apiserver: the failures a mock would hide do happen.

Cases:
- a Kueue v1beta2 ClusterQueue with `borrowingLimit` but no `cohortName` is rejected (422) by
  the CRD's CEL rule, and the same queue with a `cohortName` is accepted;
- a strategic-merge patch on a ClusterQueue gets 415; a merge patch changes `resourceGroups`;
- an update carrying a stale resourceVersion gets 409; a merge patch with a stale
  resourceVersion precondition gets 409 too;
- a `dryRun=All` create and patch answer like the real thing yet persist nothing;
- the kubeconfig written by the fixture works for a client built from it alone;
- the server reports the pinned Kubernetes version and serves kueue.x-k8s.io/v1beta2.
"""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tools.k8s_testenv import KUBERNETES_VERSION

pytestmark = pytest.mark.k8s

GROUP, VERSION, PLURAL = "kueue.x-k8s.io", "v1beta2", "clusterqueues"
MERGE = "application/merge-patch+json"


def cluster_queue(name: str, *, nominal: int = 8, borrowing: int | None = None,
                  cohort: str | None = None) -> dict:
    resource: dict = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing is not None:
        resource["borrowingLimit"] = borrowing
    spec: dict = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "h100", "resources": [resource]}],
        }],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def crs(k8s_cluster):
    with k8s_cluster.api_client() as api:
        yield client.CustomObjectsApi(api)


def test_borrowing_limit_without_cohort_is_rejected(crs):
    name = unique("cq-no-cohort")
    with pytest.raises(ApiException) as err:
        crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, cluster_queue(name, borrowing=4))
    assert err.value.status == 422
    assert "borrowingLimit must be nil when cohort is empty" in json.loads(err.value.body)["message"]
    with pytest.raises(ApiException) as missing:
        crs.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert missing.value.status == 404
    created = crs.create_cluster_custom_object(GROUP, VERSION, PLURAL,
                                               cluster_queue(name, borrowing=4, cohort="research"))
    assert created["spec"]["cohortName"] == "research"


def test_strategic_merge_patch_is_415_merge_patch_works(crs):
    name = unique("cq-patch")
    crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, cluster_queue(name, nominal=8))
    groups = cluster_queue(name, nominal=12)["spec"]["resourceGroups"]
    with pytest.raises(ApiException) as err:
        crs.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": {"resourceGroups": groups}},
                                        _content_type="application/strategic-merge-patch+json")
    assert err.value.status == 415
    patched = crs.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": {"resourceGroups": groups}},
                                              _content_type=MERGE)
    quota = patched["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert quota == 12
    stored = crs.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 12


def test_stale_resource_version_conflicts(crs):
    name = unique("cq-conflict")
    first = crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, cluster_queue(name))
    stale_rv = first["metadata"]["resourceVersion"]
    crs.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": {"cohortName": "a"}},
                                    _content_type=MERGE)
    stale = dict(first, spec={**first["spec"], "cohortName": "b"})
    with pytest.raises(ApiException) as err:
        crs.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, stale)
    assert err.value.status == 409
    precondition = {"metadata": {"resourceVersion": stale_rv}, "spec": {"cohortName": "c"}}
    with pytest.raises(ApiException) as err2:
        crs.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, precondition, _content_type=MERGE)
    assert err2.value.status == 409
    assert crs.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)["spec"]["cohortName"] == "a"


def test_dry_run_persists_nothing(crs, k8s_cluster):
    name = unique("cq-dry")
    answer = crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, cluster_queue(name), dry_run="All")
    assert answer["metadata"]["name"] == name  # the server answered as if it had created it
    with pytest.raises(ApiException) as err:
        crs.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert err.value.status == 404
    crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, cluster_queue(name, nominal=8))
    groups = cluster_queue(name, nominal=99)["spec"]["resourceGroups"]
    dry = crs.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": {"resourceGroups": groups}},
                                          dry_run="All", _content_type=MERGE)
    assert dry["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 99
    stored = crs.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 8
    # A dry-run that breaks the CEL rule is still validated: 422, not a silent success.
    with pytest.raises(ApiException) as bad:
        crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, cluster_queue(unique("cq"), borrowing=1),
                                         dry_run="All")
    assert bad.value.status == 422


def test_kubeconfig_alone_is_enough(k8s_cluster):
    api = config.new_client_from_config(config_file=str(k8s_cluster.kubeconfig))
    with api:
        version = client.VersionApi(api).get_code()
        assert version.git_version == KUBERNETES_VERSION
        groups = client.ApisApi(api).get_api_versions().groups
    kueue = next(g for g in groups if g.name == GROUP)
    assert VERSION in {v.version for v in kueue.versions}
