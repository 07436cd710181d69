"""MIG plans against a real kube-apiserver and the MIG Manager emulator.

Every test uses 2-GPU H100 nodes labelled `all-disabled` (state `success`) and MIG Manager's
ConfigMap in the test's own namespace, holding `all-disabled` and an unrelated entry.

Cases:
- happy path on two nodes: the ConfigMap gains the plan's entries and keeps the others; a watch
  sees each node cordoned before its label changes and uncordoned only after `success`; the
  plan's pods are evicted, a bystander pod stays; allocatable shows the planned MIG devices;
  the audit log has cordon → evict → label → done in order; the plan ends `applied`;
  then rollback puts the old label back (MIG devices gone), and the ConfigMap as it was;
- a node stuck `pending` times out: its label is restored, it is uncordoned and marked failed,
  the rollout stops (the second node is untouched), the plan is `failed`;
- MIG Manager reports `failed`: the same restore;
- a change that needs the host rebooted: MIG Manager goes `pending` → `rebooting` → `success`
  (mig-parted); the rollout waits through `rebooting` (in progress, never a failure), the node
  stays cordoned while it reboots, and ends `done` with the planned MIG devices;
- a PodDisruptionBudget blocks an eviction: the preview says so (`blocked`, not ok); applying
  anyway leaves that node uncordoned untouched (`blocked`) naming the budget, the next node is
  still changed; the plan ends `failed` with the budget's message;
- a budget with `maxUnavailable: 0` (no status written yet) blocks the preview with a message
  naming the budget, its rule, the pod and the node; a budget selecting nothing is not named;
- crash mid-rollout then resume: `gpuledger plans apply` in a subprocess is killed (SIGKILL)
  while it waits on MIG Manager; `apply` again continues from the record without relabelling
  the first node and finishes both;
- dry run: every write is accepted with dryRun=All, nothing changes (labels, cordon, pods,
  ConfigMap), the plan stays `approved`.

Every rollout is previewed (a dry run) after its approval, as the approval policy requires.
"""
# ruff: noqa: PLR0917 - pytest passes fixtures as positional arguments

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from gpuledger.actuator.workflow import apply, approve, rollback
from gpuledger.optimizer.plan.contract import PodRef
from gpuledger.optimizer.plan.store import load_record, save_plan
from gpuledger.warehouse import Warehouse
from tests.actuator.conftest import make_settings
from tests.actuator.helpers import (
    CONFIG_LABEL,
    STATE_LABEL,
    blocking_pdb,
    configmap_manifest,
    mig_node_change,
    mig_plan,
    node_manifest,
    pod_manifest,
    uid,
    wait_until,
)
from tests.actuator.kube_watch import Recorder
from tools.kube_loader import load_manifests
from tools.mig_manager_emulator import MigBehavior

pytestmark = pytest.mark.k8s

BASE_CONFIGS = {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "someone-elses": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}],
}


@pytest.fixture
def fleet(kube, k8s_namespace, created_nodes):
    """Two nodes, each with a GPU pod the plan evicts; n1 also runs a CPU-only bystander."""
    ns = k8s_namespace
    n1, n2 = uid("gpu-a"), uid("gpu-b")
    created_nodes += [n1, n2]
    load_manifests(kube.api, [
        configmap_manifest(ns, "mig-parted", BASE_CONFIGS),
        node_manifest(n1), node_manifest(n2),
        pod_manifest(ns, "train-1", n1), pod_manifest(ns, "train-2", n2),
        {**pod_manifest(ns, "bystander", n1), "spec": {
            "nodeName": n1, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.example/agent:1"}]}},
    ])
    return ns, n1, n2


def two_node_plan(kube, ns, n1, n2):
    tag = uid("cfg")
    return mig_plan(kube, [
        mig_node_change(n1, f"{tag}-3g", "3g.40gb", 2, pods=(PodRef(namespace=ns, pod="train-1", gpu_index=0),)),
        mig_node_change(n2, f"{tag}-1g", "1g.10gb", 7, pods=(PodRef(namespace=ns, pod="train-2", gpu_index=1),)),
    ])


def approved(wh, settings, alice, plan):
    save_plan(wh, plan)
    approve(wh, plan.id, principal=alice, settings=settings)
    return plan


def previewed(wh, settings, alice, plan, gateway):
    """Approved and previewed (a dry run), as the approval policy wants before a rollout starts."""
    approved(wh, settings, alice, plan)
    assert apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway, dry_run=True).ok
    return plan


def mig_allocatable(kube, node):
    alloc = kube.node(node)["status"]["allocatable"]
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/mig-") and v != "0"}


def test_happy_path_then_rollback(kube, gateway, wh, k8s_settings, alice, fleet, mig_manager):
    ns, n1, n2 = fleet
    plan = previewed(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2), gateway)
    target1, target2 = (c.mig_config for c in plan.changes.nodes)
    with Recorder(kube.api, kube.core.list_node, {n1, n2}) as seen:
        result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway)
        time.sleep(0.3)
    assert result.status == "applied", result.message
    assert [(s.object, s.state) for s in result.steps] == [(f"Node/{n1}", "done"), (f"Node/{n2}", "done")]
    configs = kube.mig_configs(ns, "mig-parted")
    assert configs["someone-elses"] == BASE_CONFIGS["someone-elses"]
    assert configs[target1] == [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    for node, target, expected in ((n1, target1, {"nvidia.com/mig-3g.40gb": "4"}),
                                   (n2, target2, {"nvidia.com/mig-1g.10gb": "14"})):
        labels = kube.labels(node)
        assert labels[CONFIG_LABEL] == target and labels[STATE_LABEL] == "success"
        assert mig_allocatable(kube, node) == expected
        assert not kube.unschedulable(node)
        # The witness: whenever the stored label was the new one, the node was cordoned until
        # MIG Manager said success; the uncordon came after that.
        history = seen.of(node)
        relabeled = [e for e in history if e["metadata"]["labels"].get(CONFIG_LABEL) == target]
        assert relabeled and relabeled[0]["spec"].get("unschedulable") is True
        before_success = [e for e in relabeled if e["metadata"]["labels"].get(STATE_LABEL) != "success"]
        assert all(e["spec"].get("unschedulable") for e in before_success)
    assert not kube.pod_exists(ns, "train-1") and not kube.pod_exists(ns, "train-2")
    assert kube.pod_exists(ns, "bystander")
    actions = wh.query("SELECT action FROM audit_log WHERE plan_id = ? AND object = ? ORDER BY seq",
                       [plan.id, f"Node/{n1}"])["action"].to_list()
    assert actions == ["node.cordon", "node.label", "node.uncordon", "node.done"]
    evicted = wh.query("SELECT object FROM audit_log WHERE plan_id = ? AND action = 'pod.evict' ORDER BY seq",
                       [plan.id])["object"].to_list()
    assert evicted == [f"Pod/{ns}/train-1", f"Pod/{ns}/train-2"]
    # Rollback: the old label, no MIG devices, the ConfigMap as it was.
    back = rollback(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway)
    assert back.status == "rolled_back", back.message
    for node in (n1, n2):
        assert kube.labels(node)[CONFIG_LABEL] == "all-disabled"
        assert mig_allocatable(kube, node) == {}
        assert not kube.unschedulable(node)
    assert kube.mig_configs(ns, "mig-parted") == BASE_CONFIGS


def test_pending_forever_times_out_restores_and_stops(kube, gateway, wh, alice, fleet, mig_manager):
    ns, n1, n2 = fleet
    k8s_settings = make_settings(ns, state_timeout_s=2)
    plan = previewed(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2), gateway)
    mig_manager.behavior = MigBehavior(delay_s=0.1, pending_forever_configs=frozenset({plan.changes.nodes[0].mig_config}))
    started = time.monotonic()
    result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway)
    assert time.monotonic() - started >= k8s_settings.plans.state_timeout_s
    assert result.status == "failed"
    steps = {s.object: s for s in result.steps}
    assert steps[f"Node/{n1}"].state == "failed" and "timeout" in (steps[f"Node/{n1}"].detail or "")
    assert steps[f"Node/{n2}"].state == "pending"
    assert kube.labels(n1)[CONFIG_LABEL] == "all-disabled" and not kube.unschedulable(n1)
    assert kube.labels(n2)[CONFIG_LABEL] == "all-disabled" and not kube.unschedulable(n2)
    assert kube.pod_exists(ns, "train-2")  # the stopped rollout never reached n2
    record = load_record(wh, plan.id)
    assert record.status == "failed" and "rollout stopped" in record.progress["apply"]["stopped"]


def test_failed_state_restores_the_node(kube, gateway, wh, k8s_settings, alice, fleet, mig_manager):
    ns, n1, n2 = fleet
    plan = previewed(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2), gateway)
    mig_manager.behavior = MigBehavior(delay_s=0.1, fail_nodes=frozenset({n1}))
    result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway)
    assert result.status == "failed"
    assert "reported nvidia.com/mig.config.state=failed" in result.message
    assert kube.labels(n1)[CONFIG_LABEL] == "all-disabled" and not kube.unschedulable(n1)
    restored = wh.query("SELECT before_state, after_state FROM audit_log WHERE plan_id = ? "
                        "AND action = 'node.label.restore'", [plan.id]).to_dicts()
    assert json.loads(restored[0]["after_state"]) == {CONFIG_LABEL: "all-disabled"}
    assert kube.labels(n2)[CONFIG_LABEL] == "all-disabled"


def test_rebooting_is_in_progress(kube, gateway, wh, k8s_settings, alice, fleet, mig_manager):
    from gpuledger.actuator.migconfig import MIG_STATES_IN_PROGRESS

    assert "rebooting" in MIG_STATES_IN_PROGRESS
    ns, n1, n2 = fleet
    plan = previewed(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2), gateway)
    target1 = plan.changes.nodes[0].mig_config
    mig_manager.behavior = MigBehavior(delay_s=0.1, reboot_s=1.5)
    with Recorder(kube.api, kube.core.list_node, {n1}) as seen:
        result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway)
        time.sleep(0.3)
    assert result.status == "applied", result.message
    assert [t.state for t in mig_manager.history(n1) if t.config == target1] == ["pending", "rebooting", "success"]
    rebooting = [e for e in seen.of(n1) if e["metadata"]["labels"].get(STATE_LABEL) == "rebooting"]
    assert rebooting and all(e["spec"].get("unschedulable") is True for e in rebooting)
    assert kube.labels(n1)[CONFIG_LABEL] == target1 and not kube.unschedulable(n1)
    assert mig_allocatable(kube, n1) == {"nvidia.com/mig-3g.40gb": "4"}


def test_pdb_blocks_one_node_not_the_plan(kube, gateway, wh, k8s_settings, alice, fleet, mig_manager):
    ns, n1, n2 = fleet
    kube.core.delete_namespaced_pod("train-1", ns)
    load_manifests(kube.api, [pod_manifest(ns, "train-1", n1, running=True, labels={"app": "serving"}),
                              blocking_pdb(ns, "serving", "serving")])
    plan = approved(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2))
    preview = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway, dry_run=True)
    assert preview.status == "blocked" and not preview.ok  # seen, and still allowed to apply
    result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway)
    steps = {s.object: s for s in result.steps}
    assert steps[f"Node/{n1}"].state == "blocked"
    assert (steps[f"Node/{n1}"].detail or "") == (
        f"PodDisruptionBudget {ns}/serving (allows 0 disruption(s) now, the plan needs 1) "
        f"blocks evicting Pod/{ns}/train-1")
    assert steps[f"Node/{n2}"].state == "done"
    assert kube.pod_exists(ns, "train-1")
    assert kube.labels(n1)[CONFIG_LABEL] == "all-disabled" and not kube.unschedulable(n1)
    assert kube.labels(n2)[CONFIG_LABEL] == plan.changes.nodes[1].mig_config
    assert result.status == "failed" and f"Node/{n1} blocked" in result.message


def test_pdb_max_unavailable_zero_blocks_the_preview(kube, gateway, wh, k8s_settings, alice, fleet):
    """A budget with `maxUnavailable: 0` and no status yet (no disruption controller has seen
    it): the preview names it and the node it holds, is not ok, and changes nothing."""
    ns, n1, n2 = fleet
    kube.core.delete_namespaced_pod("train-1", ns)
    load_manifests(kube.api, [
        pod_manifest(ns, "train-1", n1, running=True, labels={"app": "chat", "tier": "serving"}),
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "hold", "namespace": ns},
         "spec": {"maxUnavailable": 0, "selector": {
             "matchLabels": {"app": "chat"},
             "matchExpressions": [{"key": "tier", "operator": "In", "values": ["serving"]}]}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "other", "namespace": ns},
         "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "batch"}}}},
    ])
    plan = approved(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2))
    before = kube.node(n1)["metadata"]["resourceVersion"]
    result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway, dry_run=True)
    assert result.status == "blocked" and not result.ok
    assert result.message.endswith(
        f"; Node/{n1} would be skipped: PodDisruptionBudget {ns}/hold (maxUnavailable 0) "
        f"blocks evicting Pod/{ns}/train-1")
    assert "other" not in result.message and f"Node/{n2} would be skipped" not in result.message
    assert not any(w.object == f"Pod/{ns}/train-1" for w in result.writes)  # no eviction tried
    assert kube.node(n1)["metadata"]["resourceVersion"] == before and kube.pod_exists(ns, "train-1")
    assert load_record(wh, plan.id).status == "approved"


def test_crash_mid_rollout_then_resume(k8s_cluster, kube, gateway, tmp_path, fleet, mig_manager):
    ns, n1, n2 = fleet
    settings = make_settings(ns, state_timeout_s=60)
    config = tmp_path / "gpuledger.yaml"
    config.write_text(json.dumps({
        "access": {"roles": [{"subject": "alice", "role": "admin"}]},
        "plans": {"state_timeout_s": 60},
        "kubernetes": {"mig_configmap_namespace": ns, "mig_configmap_name": "mig-parted"},
    }))
    path = tmp_path / "crash.duckdb"
    from gpuledger.core.access import resolve_roles

    alice = resolve_roles("alice", [], settings.access)
    with Warehouse.open(path) as wh:
        plan = previewed(wh, settings, alice, two_node_plan(kube, ns, n1, n2), gateway)
    target1 = plan.changes.nodes[0].mig_config
    mig_manager.behavior = MigBehavior(delay_s=4.0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuledger", "--config", str(config), "--warehouse", str(path),
         "plans", "apply", plan.id, "--as", "alice", "--insecure-dev-identity", "--kubeconfig", str(k8s_cluster.kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: kube.labels(n1).get(CONFIG_LABEL) == target1, timeout_s=60, what="first label")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert kube.unschedulable(n1)  # the crash left the node cordoned, mid-change
    mig_manager.behavior = MigBehavior(delay_s=0.2)
    with Warehouse.open(path) as wh:
        record = load_record(wh, plan.id)
        assert record.status == "applying"
        assert record.progress["apply"]["nodes"][0]["phase"] in ("evicted", "labeled")
        result = apply(wh, plan.id, principal=alice, settings=settings, cluster=gateway)
        assert result.status == "applied", result.message
        labels_written = wh.query("SELECT object FROM audit_log WHERE plan_id = ? AND action = 'node.label'",
                                  [plan.id])["object"].to_list()
    assert labels_written.count(f"Node/{n1}") <= 1 and labels_written.count(f"Node/{n2}") == 1
    assert [t.config for t in mig_manager.transitions if t.node == n1 and t.state == "pending"] == [target1]
    for node in (n1, n2):
        assert not kube.unschedulable(node) and kube.labels(node)[STATE_LABEL] == "success"
    assert mig_allocatable(kube, n1) == {"nvidia.com/mig-3g.40gb": "4"}


def test_dry_run_changes_nothing(kube, gateway, wh, k8s_settings, alice, fleet):
    ns, n1, n2 = fleet
    plan = approved(wh, k8s_settings, alice, two_node_plan(kube, ns, n1, n2))
    before = {n: kube.node(n)["metadata"]["resourceVersion"] for n in (n1, n2)}
    cm_before = kube.core.read_namespaced_config_map("mig-parted", ns).metadata.resource_version
    result = apply(wh, plan.id, principal=alice, settings=k8s_settings, cluster=gateway, dry_run=True)
    assert result.dry_run and result.ok
    kinds = sorted({(w.verb, w.object.split("/")[0]) for w in result.writes})
    assert kinds == [("evict", "Pod"), ("patch", "ConfigMap"), ("patch", "Node")]
    assert all(w.dry_run for w in result.writes)
    label_writes = [w.patch for w in result.writes if "labels" in w.patch.get("metadata", {})]
    assert {p["metadata"]["labels"][CONFIG_LABEL] for p in label_writes} == {c.mig_config for c in plan.changes.nodes}
    assert {n: kube.node(n)["metadata"]["resourceVersion"] for n in (n1, n2)} == before
    assert kube.core.read_namespaced_config_map("mig-parted", ns).metadata.resource_version == cm_before
    assert kube.pod_exists(ns, "train-1") and kube.pod_exists(ns, "train-2")
    record = load_record(wh, plan.id)
    assert record.status == "approved" and record.progress is None
