"""Quota plans against a real kube-apiserver serving Kueue's v1beta2 ClusterQueue CRD.

Cases:
- happy path: a cohort of three queues (16 GPUs: 8/4/4 → 4/6/6) listed increase-first in the
  plan; a watch sees the decrease stored before the increases and the cohort sum never above
  16; the untouched resource and fields survive; each write is audited with before/after;
  the plan ends `applied`;
- rollback restores the old numbers through the same guarded path; the plan is `rolled_back`;
- stale plan: a quota changed after planning → ConflictingPlanError, plan `stale`, nothing
  written (resourceVersions unchanged);
- 409 mid-apply while the plan still holds: another writer labels the queue between our read
  and our write; the API server answers 409, the actuator re-reads and writes again; the other
  writer's label is kept;
- 409 mid-apply when the plan no longer holds: the other writer changed the planned quota; the
  re-read shows it, the plan fails with ConflictingPlanError and the other value is kept;
- Kueue CRD validation: a borrowingLimit on a queue without a cohort is refused by the CRD's
  CEL rule during the preview (a dry run); InvalidError, nothing written, the plan stays
  `approved` and a real apply is refused for want of a good preview;
- every real apply follows a preview (the approval policy, `actuator.approval`);
- dry run: the API server accepts every write with dryRun=All, nothing is stored, the plan stays
  `approved`;
- an unapproved plan is never applied.
"""
# ruff: noqa: PLR0917 - pytest passes fixtures as positional arguments

from __future__ import annotations

import time

import pytest

from gpuledger.actuator.gateway import ClusterGateway, RetryPolicy
from gpuledger.actuator.workflow import apply, approve, rollback
from gpuledger.core.errors import ConflictingPlanError, InvalidError, PlanError
from gpuledger.optimizer.plan.store import load_record, save_plan
from tests.actuator.helpers import KUEUE, cluster_queue_manifest, qc, quota_plan, uid, wait_until
from tests.actuator.kube_watch import Recorder

pytestmark = pytest.mark.k8s


@pytest.fixture
def cohort(k8s_cluster, kube):
    """Three queues in one fresh cohort: GPU quotas 8/4/4, plus 64 CPUs each that no plan touches."""
    from tools.kube_loader import load_manifests

    name = uid("cohort")
    queues = {uid("qa"): 8, uid("qb"): 4, uid("qc"): 4}
    load_manifests(kube.api, [
        cluster_queue_manifest(q, {"nvidia.com/gpu": gpus, "cpu": 64}, cohort=name) for q, gpus in queues.items()
    ])
    yield name, list(queues)
    for q in queues:
        kube.custom.delete_cluster_custom_object(*KUEUE[:2], KUEUE[2], q)


def approved(wh, settings, alice, plan):
    save_plan(wh, plan)
    approve(wh, plan.id, principal=alice, settings=settings)
    return plan


def preview_and_apply(wh, plan_id, alice, settings, cluster):
    """The approval policy's order: a dry-run preview, then the real apply."""
    apply(wh, plan_id, principal=alice, settings=settings, cluster=cluster, dry_run=True)
    return apply(wh, plan_id, principal=alice, settings=settings, cluster=cluster)


def rvs(kube, names):
    return {n: kube.cq(n)["metadata"]["resourceVersion"] for n in names}


def gpu(kube, name):
    return kube.quotas(name)[("h100", "nvidia.com/gpu")]


def test_happy_path_decreases_first_and_rollback(k8s_cluster, kube, gateway, wh, settings, alice, cohort):
    name, (qa, qb, qc_) = cohort
    changes = [qc(qb, 4, 6, cohort=name), qc(qa, 8, 4, cohort=name), qc(qc_, 4, 6, cohort=name)]
    plan = approved(wh, settings, alice, quota_plan(kube, changes))
    list_call = kube.custom.list_cluster_custom_object
    with Recorder(kube.api, list_call, {qa, qb, qc_}, *KUEUE) as seen:
        result = preview_and_apply(wh, plan.id, alice, settings, gateway)
        wait_until(lambda: len(seen.events) >= 3, what="three stored writes")
        time.sleep(0.3)
    assert result.status == "applied" and result.ok
    assert [gpu(kube, q) for q in (qa, qb, qc_)] == [4, 6, 6]
    # Independent witness: replay the stored versions in etcd order.
    current = {qa: 8, qb: 4, qc_: 4}
    order = []
    for obj in seen.events:
        groups = obj["spec"]["resourceGroups"]
        current[obj["metadata"]["name"]] = next(
            r["nominalQuota"] for r in groups[0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
        order.append(obj["metadata"]["name"])
        assert sum(current.values()) <= 16, f"cohort over capacity after a write to {order[-1]}: {current}"
    assert order[0] == qa  # the decrease first, although the plan listed it second
    assert kube.quotas(qa)[("h100", "cpu")] == 64
    assert kube.cq(qa)["spec"]["cohortName"] == name
    # Audit: one record per write, with the before and after lists.
    rows = wh.query("SELECT action, object, before_state, after_state, actor FROM audit_log "
                    "WHERE plan_id = ? AND action LIKE 'clusterqueue.%' ORDER BY seq", [plan.id]).to_dicts()
    assert [r["object"] for r in rows] == [f"ClusterQueue/{qa}", f"ClusterQueue/{qb}", f"ClusterQueue/{qc_}"]
    assert '"nominalQuota": 8' in rows[0]["before_state"] and '"nominalQuota": 4' in rows[0]["after_state"]
    assert {r["actor"] for r in rows} == {"alice"}
    # Rollback through the same path.
    back = rollback(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert back.status == "rolled_back"
    assert [gpu(kube, q) for q in (qa, qb, qc_)] == [8, 4, 4]
    assert load_record(wh, plan.id).status == "rolled_back"


def test_stale_plan_is_refused_and_nothing_written(kube, gateway, wh, settings, alice, cohort):
    name, (qa, qb, _) = cohort
    plan = approved(wh, settings, alice, quota_plan(kube, [qc(qa, 8, 4, cohort=name), qc(qb, 4, 8, cohort=name)]))
    apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)  # the preview
    previewed = len(gateway.writes)
    groups = kube.cq(qb)["spec"]["resourceGroups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = 5  # someone moved the cluster
    kube.patch_cq(qb, {"spec": {"resourceGroups": groups}})
    before = rvs(kube, [qa, qb])
    with pytest.raises(ConflictingPlanError, match=f"ClusterQueue/{qb}: changed since the plan was computed"):
        apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert rvs(kube, [qa, qb]) == before
    assert len(gateway.writes) == previewed and all(w.dry_run for w in gateway.writes)
    assert load_record(wh, plan.id).status == "stale"


class InterferingGateway(ClusterGateway):
    """Runs `interfere` once, just before the first real (not dry-run) PATCH of `path`."""

    def __init__(self, api, path, interfere):
        super().__init__(api, retry=RetryPolicy(attempts=2, base_s=0.01))
        self.path, self.interfere, self.real_patches = path, interfere, []

    def _send(self, method, path, **kw):
        real = method == "PATCH" and path == self.path and "dryRun" not in (kw.get("query") or {})
        if real and not self.real_patches:
            self.interfere()
        try:
            return super()._send(method, path, **kw)
        finally:
            if real:
                self.real_patches.append(path)


def test_conflict_mid_apply_is_reapplied_when_the_plan_still_holds(k8s_cluster, kube, wh, settings, alice, cohort):
    name, (qa, _, _) = cohort
    plan = approved(wh, settings, alice, quota_plan(kube, [qc(qa, 8, 6, cohort=name)]))
    interfere = lambda: kube.patch_cq(qa, {"metadata": {"labels": {"owner": "someone-else"}}})  # noqa: E731
    with InterferingGateway(k8s_cluster.api_client(), f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{qa}",
                            interfere) as gw:
        result = preview_and_apply(wh, plan.id, alice, settings, gw)
    assert result.status == "applied"
    assert len(gw.real_patches) == 2  # the first real write got 409, the second went through
    assert gpu(kube, qa) == 6
    assert kube.cq(qa)["metadata"]["labels"]["owner"] == "someone-else"


def test_conflict_mid_apply_fails_when_the_plan_no_longer_holds(k8s_cluster, kube, wh, settings, alice, cohort):
    name, (qa, _, _) = cohort
    plan = approved(wh, settings, alice, quota_plan(kube, [qc(qa, 8, 6, cohort=name)]))

    def interfere():
        groups = kube.cq(qa)["spec"]["resourceGroups"]
        groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = 7
        kube.patch_cq(qa, {"spec": {"resourceGroups": groups}})

    path = f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{qa}"
    with (
        InterferingGateway(k8s_cluster.api_client(), path, interfere) as gw,
        pytest.raises(ConflictingPlanError, match="nominalQuota is 7, the plan expected 8"),
    ):
        preview_and_apply(wh, plan.id, alice, settings, gw)
    assert len(gw.real_patches) == 1
    assert gpu(kube, qa) == 7
    assert load_record(wh, plan.id).status == "failed"


def test_kueue_validation_error_stops_before_any_write(kube, gateway, wh, settings, alice):
    from tools.kube_loader import load_manifests

    lonely, other = uid("qlone"), uid("qother")
    load_manifests(kube.api, [cluster_queue_manifest(q, {"nvidia.com/gpu": 4}, cohort=None)
                              for q in (lonely, other)])
    try:
        # `other` would be fine and comes first in write order; `lonely` has no cohort, so Kueue's
        # CEL rule refuses any borrowingLimit on it.
        changes = [qc(other, 4, 2), qc(lonely, 4, 4, new_borrow=2)]
        plan = approved(wh, settings, alice, quota_plan(kube, changes))
        before = rvs(kube, [lonely, other])
        with pytest.raises(InvalidError, match="borrowingLimit must be nil when cohort is empty"):
            apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)
        assert rvs(kube, [lonely, other]) == before
        assert gateway.writes and all(w.dry_run for w in gateway.writes)
        # a failed preview moves nothing, and without a good preview no rollout starts
        assert load_record(wh, plan.id).status == "approved"
        with pytest.raises(PlanError, match=r"preview it \(dry run\) first"):
            apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
        assert rvs(kube, [lonely, other]) == before
    finally:
        for q in (lonely, other):
            kube.custom.delete_cluster_custom_object(*KUEUE[:2], KUEUE[2], q)


def test_dry_run_writes_nothing(kube, gateway, wh, settings, alice, cohort):
    name, (qa, qb, _) = cohort
    plan = approved(wh, settings, alice, quota_plan(kube, [qc(qa, 8, 4, cohort=name), qc(qb, 4, 8, cohort=name)]))
    before = rvs(kube, [qa, qb])
    result = apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)
    assert result.dry_run and result.ok
    assert sorted(w.object for w in result.writes) == sorted([f"ClusterQueue/{qa}", f"ClusterQueue/{qb}"])
    assert all(w.dry_run for w in result.writes)
    assert rvs(kube, [qa, qb]) == before
    record = load_record(wh, plan.id)
    assert record.status == "approved" and record.progress is None


def test_unapproved_plan_is_never_applied(kube, gateway, wh, settings, alice, cohort):
    name, (qa, _, _) = cohort
    plan = quota_plan(kube, [qc(qa, 8, 4, cohort=name)])
    save_plan(wh, plan)
    before = rvs(kube, [qa])
    with pytest.raises(PlanError, match="approve it first"):
        apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert rvs(kube, [qa]) == before and gateway.writes == []
