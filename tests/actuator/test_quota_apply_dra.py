"""A Kueue DRA quota resource (decision 0113) applied through the real kube-apiserver's Kueue CRD.

Cases:
- a cohort of two ClusterQueues declaring `nvidia.com/gpu`, a DRA quota name (Kueue's
  `deviceClassMappings` name) and cpu; a plan that moves DRA quota 4/4 → 6/2: the preview (a
  dry run) stores nothing, the apply stores the DRA `nominalQuota` the plan names and leaves the
  GPU and cpu quotas as they were; rollback restores 4/4.
"""
# ruff: noqa: PLR0917 - pytest passes fixtures as positional arguments

from __future__ import annotations

import pytest

from gpuledger.actuator.workflow import apply, approve, rollback
from gpuledger.optimizer.plan.store import save_plan
from tests.actuator.helpers import KUEUE, cluster_queue_manifest, qc, quota_plan, uid

pytestmark = pytest.mark.k8s
DRA = "gpu.example.com"


def test_dra_quota_is_previewed_applied_and_rolled_back(k8s_cluster, kube, gateway, wh, settings, alice):
    from tools.kube_loader import load_manifests

    cohort = uid("cohort")
    qa, qb = uid("qa"), uid("qb")
    load_manifests(kube.api, [cluster_queue_manifest(q, {"nvidia.com/gpu": 4, DRA: 4, "cpu": 64},
                                                     cohort=cohort) for q in (qa, qb)])
    try:
        plan = quota_plan(kube, [qc(qa, 4, 6, cohort=cohort, resource=DRA),
                                 qc(qb, 4, 2, cohort=cohort, resource=DRA)])
        save_plan(wh, plan)
        approve(wh, plan.id, principal=alice, settings=settings)
        before = {q: kube.cq(q)["metadata"]["resourceVersion"] for q in (qa, qb)}
        preview = apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)
        assert preview.ok and preview.dry_run and len(preview.writes) == 2
        assert {q: kube.cq(q)["metadata"]["resourceVersion"] for q in (qa, qb)} == before
        assert [kube.quotas(q)[("h100", DRA)] for q in (qa, qb)] == [4, 4]
        result = apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
        assert result.status == "applied" and result.ok
        for q, dra in ((qa, 6), (qb, 2)):
            quotas = kube.quotas(q)
            assert quotas[("h100", DRA)] == dra
            assert quotas[("h100", "nvidia.com/gpu")] == 4 and quotas[("h100", "cpu")] == 64
        back = rollback(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
        assert back.status == "rolled_back"
        assert [kube.quotas(q)[("h100", DRA)] for q in (qa, qb)] == [4, 4]
    finally:
        for q in (qa, qb):
            kube.custom.delete_cluster_custom_object(*KUEUE[:2], KUEUE[2], q)
