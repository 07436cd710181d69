"""Autoscaling manifests pass a server-side dry-run against the real kube-apiserver.

Cases:
- the HPA rendered from the seeded diurnal service's proposal is accepted by
  `dryRun=All` (the apiserver's own validation of autoscaling/v2: metric names, quantities,
  behavior policies, replica bounds) and nothing is persisted;
- the same manifest broken (maxReplicas below minReplicas) is refused with 422, so the check
  above can fail.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuledger.analytics.advice.autoscaling import autoscaling_advice
from gpuledger.analytics.advice.autoscaling_manifest import render_hpa
from tests.advice.test_autoscaling import POLICY, series


def _hpa(namespace: str) -> Any:
    (advice,) = autoscaling_advice(series(), POLICY, unit_price=3.0)
    manifest = render_hpa(advice)
    manifest["metadata"]["namespace"] = namespace
    return manifest


def test_hpa_passes_server_side_dry_run(k8s_cluster, k8s_namespace: str) -> None:
    from kubernetes import client

    manifest = _hpa(k8s_namespace)
    with k8s_cluster.api_client() as api:
        hpa = client.AutoscalingV2Api(api)
        answer = hpa.create_namespaced_horizontal_pod_autoscaler(
            k8s_namespace, manifest, dry_run="All", _preload_content=False)
        assert answer.status == 201
        listed = hpa.list_namespaced_horizontal_pod_autoscaler(k8s_namespace)
        assert listed.items == []  # a dry run persists nothing


def test_broken_hpa_is_refused(k8s_cluster, k8s_namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    manifest = copy.deepcopy(_hpa(k8s_namespace))
    manifest["spec"]["maxReplicas"] = 1
    manifest["spec"]["minReplicas"] = 3
    with k8s_cluster.api_client() as api, pytest.raises(ApiException) as raised:
        client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(
            k8s_namespace, manifest, dry_run="All")
    assert raised.value.status == 422
