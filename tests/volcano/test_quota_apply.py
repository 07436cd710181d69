"""A quota plan for Volcano Queues, computed by the real optimizer (CP-SAT) from Queues listed
out of a real kube-apiserver serving Volcano's v1.16 Queue CRD, then previewed (dry run),
applied, audited and rolled back through the same guarded path as Kueue's ClusterQueues.

Queues a (deserved 8, capability 12, guarantee 2 GPUs) and b (deserved 4, capability 12) share
a parent; a's recorded demand is 2 GPUs, b's 10. Checked against the plan's own numbers,
mapped by hand here (deserved = nominal, capability = nominal + borrowing limit, guarantee =
nominal - lending limit): the live Queues after the apply, the 64 CPUs no plan touches, the
decrease written before the increase (a watch of etcd's order), one audit record per write,
the dry run changing nothing, a stale plan refused, and the rollback restoring every number.
The GitOps export of the same plan (`plans export`, issue 30) round-trips: its manifests hold
only the planned GPU entries, pass a server-side apply dry run that stores nothing, describe
exactly what the apply then writes, and the rollback restores the Queues.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
import yaml
from kubernetes import client

from gpuledger.actuator.export import dry_run, export_objects, render
from gpuledger.actuator.workflow import apply, approve, rollback
from gpuledger.cli import main
from gpuledger.collectors.kubernetes import KubernetesCollector
from gpuledger.core.errors import ConflictingPlanError
from gpuledger.optimizer.plan.store import load_record, save_plan
from gpuledger.optimizer.quota.inputs import QuotaInputs, check_history
from gpuledger.optimizer.quota.planner import QuotaOptions, plan_quota
from gpuledger.optimizer.quota.queues import quota_reader
from gpuledger.optimizer.quota.spec import default_capacity
from gpuledger.warehouse import Warehouse
from tests.actuator.helpers import uid

pytestmark = pytest.mark.k8s
GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "queues"
GPU = "nvidia.com/gpu"
NOW = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
"""The plans are approved and applied on the wall clock (`plans.expire_after_hours`): a fixed date
would expire them once it is three days old."""


@pytest.fixture
def queues(volcano_cluster):
    api = volcano_cluster.api_client()
    custom = client.CustomObjectsApi(api)
    parent, qa, qb = uid("vparent"), uid("vqa"), uid("vqb")
    specs = {
        qa: {"parent": parent, "weight": 1, "reclaimable": True,
             "deserved": {GPU: 8, "cpu": 64}, "capability": {GPU: 12, "cpu": 64},
             "guarantee": {"resource": {GPU: 2}}},
        qb: {"parent": parent, "weight": 1, "deserved": {GPU: 4, "cpu": 64}, "capability": {GPU: 12}},
    }
    for name, spec in specs.items():
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": name}, "spec": spec})
    yield api, custom, parent, qa, qb
    for name in specs:
        custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    api.close()


def _inputs(api, settings, names) -> QuotaInputs:
    """The Queues as the collector lists them → the planner's inputs, with a week of demand."""
    rows = KubernetesCollector(api, settings, queue_system=("kueue", "volcano")).queues(NOW)
    mine = rows.filter(pl.col("kind") == "Queue", pl.col("name").is_in(list(names)))
    reader = quota_reader("volcano")
    specs = tuple(
        reader.queue_from_object({"metadata": {"name": r["name"], "resourceVersion": r["resource_version"]},
                                  "spec": json.loads(r["spec"])}, "test")
        for r in mine.sort("name").iter_rows(named=True))
    hours = [NOW - timedelta(hours=h) for h in range(24 * 7, 0, -1)]
    demand = {names[0]: 2.0, names[1]: 10.0}
    history = pl.DataFrame([{"ts": t, "cluster_queue": q, "flavor": "default", "resource": GPU, "demand": d}
                            for t in hours for q, d in demand.items()])
    checked, step = check_history(history, "test", specs)
    return QuotaInputs(specs, default_capacity(specs), checked, step, source="test", queue_system="volcano")


def _live(custom, name):
    spec = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)["spec"]
    return (spec["deserved"].get(GPU), (spec.get("capability") or {}).get(GPU),
            ((spec.get("guarantee") or {}).get("resource") or {}).get(GPU), spec["deserved"].get("cpu"))


def _expected(change):
    """The live numbers a change must leave, mapped by hand from the neutral quota."""
    n, b, lend = change.new_nominal, change.new_borrowing_limit, change.new_lending_limit
    return (n, None if b is None else n + b, None if lend is None else n - lend)


def test_volcano_plan_previewed_applied_audited_rolled_back(queues, gateway, wh, settings, alice):
    api, custom, parent, qa, qb = queues
    inputs = _inputs(api, settings, (qa, qb))
    assert [q.cohort for q in inputs.queues] == [parent, parent]
    assert inputs.queue(qa).quotas[("default", GPU)].lending_limit == 6  # deserved 8 - guarantee 2
    plan = plan_quota(inputs, QuotaOptions(time_limit_s=20), settings, NOW)
    assert {o.kind for o in plan.observed} == {"Queue"}
    changes = {c.cluster_queue: c for c in plan.changes.quotas}
    assert changes[qa].new_nominal < 8 and changes[qb].new_nominal > 4  # quota follows demand
    assert changes[qa].new_nominal + changes[qb].new_nominal == 12  # capacity kept
    before = {q: _live(custom, q) for q in (qa, qb)}
    save_plan(wh, plan)
    approve(wh, plan.id, principal=alice, settings=settings)
    apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)
    assert {q: _live(custom, q) for q in (qa, qb)} == before  # the preview wrote nothing
    assert all(w.dry_run for w in gateway.writes)
    result = apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert result.status == "applied" and result.ok
    for q in (qa, qb):
        live = _live(custom, q)
        assert live[:3] == tuple(v if v is None else pytest.approx(v) for v in _expected(changes[q]))
        assert live[3] == 64  # cpu is never planned
    rows = wh.query("SELECT action, object, before_state, after_state, actor FROM audit_log "
                    "WHERE plan_id = ? AND action LIKE 'queue.%' ORDER BY seq", [plan.id]).to_dicts()
    assert [(r["action"], r["object"]) for r in rows] == [("queue.decrease", f"Queue/{qa}"),
                                                          ("queue.increase", f"Queue/{qb}")]
    assert f'"{GPU}": 8' in rows[0]["before_state"] and {r["actor"] for r in rows} == {"alice"}
    back = rollback(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert back.status == "rolled_back"
    assert {q: _live(custom, q) for q in (qa, qb)} == before
    assert load_record(wh, plan.id).status == "rolled_back"


def test_volcano_plan_refused_when_the_queue_moved(queues, gateway, wh, settings, alice):
    api, custom, _parent, qa, qb = queues
    plan = plan_quota(_inputs(api, settings, (qa, qb)), QuotaOptions(time_limit_s=20), settings, NOW)
    save_plan(wh, plan)
    approve(wh, plan.id, principal=alice, settings=settings)
    apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)
    custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, qb, {"spec": {"capability": {GPU: 11}}})
    moved = _live(custom, qa), _live(custom, qb)
    with pytest.raises(ConflictingPlanError, match=f"Queue/{qb}: changed since the plan was computed"):
        apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
    assert (_live(custom, qa), _live(custom, qb)) == moved
    assert load_record(wh, plan.id).status == "stale"


def _gpu_entries(spec):
    return (spec.get("deserved", {}).get(GPU), spec.get("capability", {}).get(GPU),
            spec.get("guarantee", {}).get("resource", {}).get(GPU))


def test_volcano_plan_exported_dry_run_applied_rolled_back(queues, gateway, wh, settings, alice, *,
                                                            tmp_path, capsys):
    api, custom, _parent, qa, qb = queues
    plan = plan_quota(_inputs(api, settings, (qa, qb)), QuotaOptions(time_limit_s=20), settings, NOW)
    changes = {c.cluster_queue: c for c in plan.changes.quotas}
    before = {q: _live(custom, q) for q in (qa, qb)}
    versions = {q: custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, q)["metadata"]["resourceVersion"]
                for q in (qa, qb)}
    # 1. export: one Queue manifest per changed queue, only the planned GPU entries (no cpu)
    objects = export_objects(plan, settings)
    docs = [doc for _, doc in objects]
    assert [(d["apiVersion"], d["kind"], d["metadata"]["name"]) for d in docs] == [
        (f"{GROUP}/{VERSION}", "Queue", q) for q in sorted((qa, qb))]
    for d in docs:
        name = d["metadata"]["name"]
        want = _expected(changes[name])
        assert _gpu_entries(d["spec"]) == tuple(v if v is None else pytest.approx(v) for v in want)
        assert "cpu" not in json.dumps(d)
    assert list(yaml.safe_load_all(render(docs))) == docs
    # the command a GitOps user runs (exit 70 with an AttributeError before issue 30)
    path = tmp_path / "cli.duckdb"
    with Warehouse.open(path) as other:
        save_plan(other, plan)
    assert main(["--warehouse", str(path), "plans", "export", plan.id, "-o", "yaml"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == docs
    # 2. server-side dry run: judged by the CRD schema, nothing stored
    assert dry_run(gateway, objects) == [f"Queue/{d['metadata']['name']}" for d in docs]
    assert {q: custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, q)["metadata"]["resourceVersion"]
            for q in (qa, qb)} == versions
    # 3. apply: the live Queues hold exactly the exported entries, cpu untouched
    save_plan(wh, plan)
    approve(wh, plan.id, principal=alice, settings=settings)
    apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True)  # the preview
    assert apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway).ok
    for d in docs:
        live = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, d["metadata"]["name"])["spec"]
        assert _gpu_entries(live) == tuple(v if v is None else pytest.approx(v) for v in _gpu_entries(d["spec"]))
        assert live["deserved"]["cpu"] == 64
    # 4. rollback: every number as before
    assert rollback(wh, plan.id, principal=alice, settings=settings, cluster=gateway).status == "rolled_back"
    assert {q: _live(custom, q) for q in (qa, qb)} == before
