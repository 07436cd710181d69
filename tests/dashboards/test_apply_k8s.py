"""Apply from the dashboard against a real kube-apiserver (Kueue v1beta2 ClusterQueue CRD).

Cases (all through the Dash callback endpoint, as the browser posts them, as an admin):
- Apply is refused before a dry-run preview; the preview sends the write with dryRun=All and
  changes nothing (quota and resourceVersion unchanged, plan still `approved`);
- after the preview, Apply starts the rollout in the background; the live rollout panel reports
  it; it ends `applied`, the ClusterQueue holds the new nominal quota, and the audit log has
  the write.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuledger.dashboards.app import create_app
from gpuledger.optimizer.plan.contract import (
    ClusterQueueUpdate,
    Effect,
    ObservedObject,
    Plan,
    QuotaChange,
    QuotaChanges,
    SolverInfo,
    fingerprint_of,
    state_hash,
)
from gpuledger.optimizer.plan.store import load_record, save_plan
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import admin_headers, settings_with_roles
from tests.dashboards.test_http import callback, post

pytestmark = pytest.mark.k8s
KUEUE = ("kueue.x-k8s.io", "v1beta2", "clusterqueues")


def _cluster_queue(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}],
        }]},
    }


def _quota_plan(custom: Any, name: str, old: int, new: int) -> Plan:
    """A quota plan whose fingerprint is the queue as read now (ObservedObject's definition)."""
    obj = custom.get_cluster_custom_object(*KUEUE, name)
    spec = obj["spec"]
    observed = (ObservedObject(
        kind="ClusterQueue", name=name, resource_version=obj["metadata"]["resourceVersion"],
        state=state_hash({"cohortName": spec.get("cohortName"), "resourceGroups": spec["resourceGroups"]}),
    ),)
    change = QuotaChange(cluster_queue=name, flavor="h100", resource="nvidia.com/gpu",
                         old_nominal=old, new_nominal=new)
    return Plan(
        id=f"quota-dash-{uuid.uuid4().hex[:6]}", kind="quota", created_at=datetime.now(UTC) - timedelta(minutes=1),
        fingerprint=fingerprint_of(observed), observed=observed,
        changes=QuotaChanges(quotas=(change,), cluster_queues=(
            ClusterQueueUpdate(name=name, resource_groups=tuple(spec["resourceGroups"])),)),
        effect=Effect(pending_gpu_minutes_before=100.0, pending_gpu_minutes_after=20.0),
        solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30),
    )


def _nominal(custom: Any, name: str) -> tuple[Any, str]:
    obj = custom.get_cluster_custom_object(*KUEUE, name)
    quota = obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    return quota, obj["metadata"]["resourceVersion"]


def test_preview_then_apply(k8s_cluster: Any, demo_copy: Path, tmp_path: Path) -> None:
    from kubernetes import client

    from gpuledger.actuator.gateway import ClusterGateway, RetryPolicy

    name = f"dash-{uuid.uuid4().hex[:6]}"
    with k8s_cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        custom.create_cluster_custom_object(*KUEUE, _cluster_queue(name, 8))
        plan = _quota_plan(custom, name, 8, 6)
        with Warehouse.open(demo_copy) as wh:
            save_plan(wh, plan)
        app = create_app(
            settings_with_roles(), demo_copy, background=False, cache_dir=tmp_path / "cache",
            cluster_factory=lambda: ClusterGateway(k8s_cluster.api_client(),
                                                   retry=RetryPolicy(attempts=3, base_s=0.05)),
        )
        try:
            def press(button: str) -> str:
                body = callback(app, "flash.children", {f"{button}.n_clicks": 1},
                                {"plan-id.data": plan.id, "bump.data": 0}, f"{button}.n_clicks")
                return post(app, body, admin_headers()).get_data(as_text=True)

            assert "approved by ada" in press("btn-approve")
            assert "preview it (dry run) first" in press("btn-apply")
            before = _nominal(custom, name)
            preview = press("btn-preview")
            assert "Dry run of" in preview and "1 write(s) accepted" in preview, preview
            assert _nominal(custom, name) == before
            with Warehouse.open(demo_copy, read_only=True) as wh:
                assert load_record(wh, plan.id).status == "approved"
            assert "Rollout of" in press("btn-apply")
            status_body = callback(app, "rollout-status.children", {"rollout-tick.n_intervals": 1},
                                   {"plan-id.data": plan.id}, "rollout-tick.n_intervals")
            deadline = time.monotonic() + 60
            while True:
                panel = json.loads(post(app, status_body, admin_headers()).get_data(as_text=True))
                text = json.dumps(panel)
                if "finished" in text or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert "finished: status applied" in text, text
            app.actions.wait()
            assert _nominal(custom, name)[0] == 6
            with Warehouse.open(demo_copy, read_only=True) as wh:
                assert load_record(wh, plan.id).status == "applied"
                actions = wh.query("SELECT action, result FROM audit_log WHERE plan_id = ?", [plan.id]).rows()
            assert ("apply.dry_run", "dry-run") in actions
            assert any(a.startswith("quota") or a.startswith("cluster") for a, _ in actions), actions
        finally:
            app.close()
            custom.delete_cluster_custom_object(*KUEUE, name)
