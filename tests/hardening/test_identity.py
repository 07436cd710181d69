"""Who approved (issue 22, item 9): the CLI acts as an identity something vouches for, and the
audit log records the real principal.

Cases:
- `plans approve ID --as alice` (alice is admin in the role map) is refused with exit 3 and the
  plan stays proposed: a self-declared name is not believed (today: approved as alice);
- with `--insecure-dev-identity` it is believed, and the audit log records the claimed name next
  to the real OS account that claimed it;
- without a cluster the identity is the OS account of the real user id: `$USER`/`$LOGNAME` set
  to an admin's name change nothing; the OS account bound as admin approves, and the audit
  actor is that account;
- against the real kube-apiserver (`k8s_cluster`): SelfSubjectReview through the gateway names
  an impersonated user and its group, and a ServiceAccount token's own
  `system:serviceaccount:<ns>:<name>`;
- `plans approve ID --kubeconfig <ServiceAccount kubeconfig>` acts as that ServiceAccount: the
  role map binds it as admin, the plan is approved and the audit actor is the ServiceAccount;
  the same kubeconfig with `--as alice` (no dev flag) is refused.
"""

from __future__ import annotations

import json
import os
import pwd
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gpuledger.cli import main
from gpuledger.optimizer.plan.contract import (
    Effect,
    ObservedObject,
    Plan,
    QuotaChanges,
    SolverInfo,
    fingerprint_of,
)
from gpuledger.optimizer.plan.store import load_record, save_plan
from gpuledger.warehouse import Warehouse
from tests.actuator.helpers import qc

REAL_USER = pwd.getpwuid(os.getuid()).pw_name


def _plan(name: str = "id1") -> Plan:
    observed = (ObservedObject(kind="ClusterQueue", name="team-a", resource_version="5", state="abc"),)
    return Plan(
        id=f"quota-{name}", kind="quota", created_at=datetime.now(UTC), fingerprint=fingerprint_of(observed),
        observed=observed, changes=QuotaChanges(quotas=(qc("team-a", 8, 4),), cluster_queues=()),
        effect=Effect(), solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30),
    )


def _setup(tmp_path: Path, admins: list[str]) -> tuple[list[str], Path, str]:
    config = tmp_path / "gpuledger.yaml"
    config.write_text(json.dumps({"access": {"roles": [{"subject": s, "role": "admin"} for s in admins]}}))
    path = tmp_path / "wh.duckdb"
    plan = _plan()
    with Warehouse.open(path) as wh:
        save_plan(wh, plan)
    return ["--config", str(config), "--warehouse", str(path), "plans"], path, plan.id


def _state(path: Path, plan_id: str) -> tuple[str, list[str]]:
    with Warehouse.open(path, read_only=True) as wh:
        actors = wh.query("SELECT actor FROM audit_log WHERE plan_id = ? ORDER BY seq", [plan_id])
        return load_record(wh, plan_id).status, [str(a) for a in actors["actor"].to_list()]


# 1. Self-declared identities -----------------------------------------------------------------------
def test_self_declared_admin_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    base, path, plan_id = _setup(tmp_path, ["alice"])
    assert main([*base, "approve", plan_id, "--as", "alice"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuledger: error: --as/--groups declare an identity") and "\n" not in err
    assert main([*base, "approve", plan_id, "--groups", "platform"]) == 3
    assert _state(path, plan_id)[0] == "proposed"


def test_dev_flag_believes_the_claim_and_the_audit_says_who_claimed(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    base, path, plan_id = _setup(tmp_path, ["alice"])
    assert main([*base, "approve", plan_id, "--as", "alice", "--insecure-dev-identity"]) == 0
    status, actors = _state(path, plan_id)
    assert status == "approved"
    assert actors[-1] == f"alice (self-declared by OS user {REAL_USER}, --insecure-dev-identity)"


# 2. The OS account -------------------------------------------------------------------------------
def test_os_account_is_the_identity_outside_a_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "alice")  # spoofing the login name must not help
    base, path, plan_id = _setup(tmp_path, ["alice"])
    assert main([*base, "approve", plan_id]) == 3
    assert f"user {REAL_USER!r} may not approve" in capsys.readouterr().err
    bound = tmp_path / "bound"
    bound.mkdir()
    base, path, plan_id = _setup(bound, [REAL_USER])
    assert main([*base, "approve", plan_id]) == 0
    status, actors = _state(path, plan_id)
    assert status == "approved" and actors[-1] == REAL_USER


# 3. Kubernetes credentials ------------------------------------------------------------------------
@pytest.mark.k8s
def test_self_subject_review_names_the_credentials(k8s_cluster, k8s_namespace):
    from gpuledger.actuator.gateway import ClusterGateway
    from gpuledger.actuator.identity import cluster_identity

    with ClusterGateway(k8s_cluster.api_client(impersonate="jane", group="platform")) as gw:
        user, groups = cluster_identity(gw)
    assert user == "jane" and "platform" in groups and "system:authenticated" in groups
    token = k8s_cluster.service_account_token(k8s_namespace, "approver")
    with ClusterGateway(k8s_cluster.api_client(token)) as gw:
        user, groups = cluster_identity(gw)
    assert user == f"system:serviceaccount:{k8s_namespace}:approver"
    assert f"system:serviceaccounts:{k8s_namespace}" in groups


@pytest.mark.k8s
def test_cli_approves_as_the_kubeconfig_identity(k8s_cluster, k8s_namespace, tmp_path, capsys):
    account = f"system:serviceaccount:{k8s_namespace}:approver"
    token = k8s_cluster.service_account_token(k8s_namespace, "approver")
    kubeconfig = tmp_path / "approver.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": k8s_cluster.server,
                                               "certificate-authority": str(k8s_cluster.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "sa"}}],
    }))
    base, path, plan_id = _setup(tmp_path, ["alice", account])
    assert main([*base, "approve", plan_id, "--kubeconfig", str(kubeconfig), "--as", "alice"]) == 3
    assert _state(path, plan_id)[0] == "proposed"
    capsys.readouterr()
    assert main([*base, "approve", plan_id, "--kubeconfig", str(kubeconfig)]) == 0
    assert f"(by {account})" in capsys.readouterr().out
    status, actors = _state(path, plan_id)
    assert status == "approved" and actors[-1] == account
