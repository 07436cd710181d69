"""Every object the chart renders (default and three variants, "full" with every value set) passes a server-side dry-run apply
on the real kube-apiserver, with the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs
(generated from the operator's API types by `tools.helm_build`) installed.

Server-side apply runs the API server's full validation (schemas, CRD OpenAPI, CronJob
schedules and time zones, field types) and admission, without persisting anything.
"""

from __future__ import annotations

import pytest
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from tests.deploy.chart import VARIANTS, helm_layout, render
from tools.helm_build.builder import CRDS
from tools.k8s_testenv.crds import install_crds

pytestmark = pytest.mark.k8s
NAMESPACES = ("gpuledger", "gpu-operator", "nvidia")


@pytest.fixture(scope="module")
def api(k8s_cluster):
    layout = helm_layout()
    with k8s_cluster.api_client() as api:
        install_crds(api, layout.crds)
        core = client.CoreV1Api(api)
        for ns in NAMESPACES:
            try:
                core.create_namespace({"metadata": {"name": ns}})
            except ApiException as exc:
                if exc.status != 409:
                    raise
        yield api


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_object_passes_server_side_dry_run(api, variant):
    dyn = dynamic.DynamicClient(api)
    docs = render(variant)
    kinds = {d["kind"] for d in docs}
    expected = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                "ConfigMap", "Deployment", "Service", "CronJob"}
    assert expected <= kinds
    if variant == "default":
        assert {"ServiceMonitor", "PrometheusRule", "PersistentVolumeClaim"} <= kinds
    if variant == "full":  # every new value: the Ingress, the chart's Secret, the helm test Pod
        assert {"Ingress", "Secret", "Pod"} <= kinds
        # collect, report, compact, publish and publish-capacity
        assert sum(d["kind"] == "CronJob" for d in docs) == 5
    for doc in docs:
        resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        namespace = doc["metadata"].get("namespace") if resource.namespaced else None
        answer = resource.server_side_apply(
            body=doc, name=doc["metadata"]["name"], namespace=namespace,
            field_manager="gpuledger-chart-test", dry_run="All", force_conflicts=True)
        assert answer.kind == doc["kind"], doc["metadata"]["name"]
        assert answer.metadata.name == doc["metadata"]["name"]


def test_an_invalid_object_is_refused(api):
    """The dry run does validate: a CronJob with a bad schedule, a rule without its expression."""
    dyn = dynamic.DynamicClient(api)
    docs = render()
    cron = next(d for d in docs if d["kind"] == "CronJob")
    bad_cron = {**cron, "spec": {**cron["spec"], "schedule": "every day"}}
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    bad_rule = {**rule, "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "for": "5m"}]}]}}  # no expr
    for doc in (bad_cron, bad_rule):
        resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        with pytest.raises(ApiException) as caught:
            resource.server_side_apply(body=doc, name=doc["metadata"]["name"], namespace="gpuledger",
                                       field_manager="gpuledger-chart-test", dry_run="All")
        assert caught.value.status == 422, caught.value.body


def test_the_crds_are_the_ones_the_chart_needs():
    layout = helm_layout()
    assert {f"monitoring.coreos.com_{p}.yaml" for p in CRDS} == {p.name for p in layout.crds.glob("*.yaml")}
