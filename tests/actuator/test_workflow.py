"""Approval rules of the plan workflow, on a real warehouse file (no cluster needed).

Cases:
- a non-admin cannot approve, reject, apply or roll back: AccessDeniedError, the plan keeps
  its status, and the refusal is in the audit log;
- an admin (by user or by group) approves; the audit log names them;
- an expired plan is never approved nor applied: it is marked `expired`;
- `expire` sweeps old proposed/approved plans and leaves fresh ones;
- a rejected plan cannot be approved afterwards; reject needs a proposed/approved plan;
- an unapproved (proposed) plan is never applied: refused before any request reaches the cluster;
- the CLI: `plans approve ID --as alice` exits 0, `--as bob` exits 3 with a one-line message;
- preview before apply (the approval policy, same for CLI and dashboard): an approved plan is
  not applied without a dry run in the last 15 minutes (refused, status kept), a stale preview
  no longer counts, a fresh one does;
- the CLI: `plans apply ID` of an unpreviewed plan exits non-zero with one line and leaves it
  approved; after `plans apply ID --dry-run` the same command applies it.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from gpuledger.actuator.gateway import ClusterGateway, RetryPolicy
from gpuledger.actuator.workflow import apply, approve, expire, reject, rollback
from gpuledger.core.access import resolve_roles
from gpuledger.core.errors import AccessDeniedError, PlanError
from gpuledger.optimizer.plan.contract import (
    Effect,
    ObservedObject,
    Plan,
    QuotaChanges,
    SolverInfo,
    fingerprint_of,
)
from gpuledger.optimizer.plan.store import load_record, save_plan
from tests.actuator.helpers import qc

NOW = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)


def offline_plan(created_at: datetime = NOW, name: str = "q1") -> Plan:
    observed = (ObservedObject(kind="ClusterQueue", name="team-a", resource_version="5", state="abc"),)
    return Plan(
        id=f"quota-{name}", kind="quota", created_at=created_at, fingerprint=fingerprint_of(observed),
        observed=observed, changes=QuotaChanges(quotas=(qc("team-a", 8, 4),), cluster_queues=()),
        effect=Effect(), solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30),
    )


def audit(wh, plan_id):
    return wh.query("SELECT actor, action, result, detail FROM audit_log WHERE plan_id = ? ORDER BY seq",
                    [plan_id]).to_dicts()


@pytest.fixture
def unreachable():
    """A gateway to a free loopback port nobody listens on: any request would fail loudly."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    with ClusterGateway(client.ApiClient(config), retry=RetryPolicy(attempts=1)) as gateway:
        yield gateway


def test_non_admin_cannot_act(wh, settings, bob, unreachable):
    plan = offline_plan()
    save_plan(wh, plan, now=NOW)
    with pytest.raises(AccessDeniedError, match="'bob' may not approve"):
        approve(wh, plan.id, principal=bob, settings=settings, now=NOW)
    with pytest.raises(AccessDeniedError):
        reject(wh, plan.id, principal=bob, settings=settings, reason="no", now=NOW)
    with pytest.raises(AccessDeniedError):
        apply(wh, plan.id, principal=bob, settings=settings, cluster=unreachable, now=NOW)
    with pytest.raises(AccessDeniedError):
        rollback(wh, plan.id, principal=bob, settings=settings, cluster=unreachable, now=NOW)
    assert load_record(wh, plan.id).status == "proposed"
    denied = [r for r in audit(wh, plan.id) if r["result"] == "denied"]
    assert [r["action"] for r in denied] == ["plan.approve", "plan.reject", "plan.apply", "plan.roll_back"]
    assert {r["actor"] for r in denied} == {"bob"}
    assert unreachable.writes == []


def test_admin_approves_by_user_or_group(wh, settings, alice):
    first, second = offline_plan(name="a"), offline_plan(name="b")
    save_plan(wh, first, now=NOW)
    save_plan(wh, second, now=NOW)
    assert approve(wh, first.id, principal=alice, settings=settings, now=NOW).status == "approved"
    carol = resolve_roles("carol", ["platform"], settings.access)
    assert approve(wh, second.id, principal=carol, settings=settings, now=NOW).status == "approved"
    last = audit(wh, second.id)[-1]
    assert last["actor"] == "carol" and last["action"] == "plan.status"
    with pytest.raises(PlanError, match="only a proposed plan can be approved"):
        approve(wh, first.id, principal=alice, settings=settings, now=NOW)


def test_expired_plan_is_never_approved_or_applied(wh, settings, alice, unreachable):
    old = offline_plan(created_at=NOW - timedelta(hours=73), name="old")
    save_plan(wh, old, now=old.created_at)
    with pytest.raises(PlanError, match="expire_after_hours=72; it expired"):
        approve(wh, old.id, principal=alice, settings=settings, now=NOW)
    assert load_record(wh, old.id).status == "expired"
    with pytest.raises(PlanError, match="expired"):
        apply(wh, old.id, principal=alice, settings=settings, cluster=unreachable, now=NOW)
    # Approved in time, applied too late: still refused, and marked expired.
    late = offline_plan(created_at=NOW - timedelta(hours=71), name="late")
    save_plan(wh, late, now=late.created_at)
    approve(wh, late.id, principal=alice, settings=settings, now=NOW)
    with pytest.raises(PlanError, match="expired"):
        apply(wh, late.id, principal=alice, settings=settings, cluster=unreachable, now=NOW + timedelta(hours=2))
    assert load_record(wh, late.id).status == "expired"
    assert unreachable.writes == []


def test_expire_sweeps_only_old_plans(wh, settings):
    old = offline_plan(created_at=NOW - timedelta(hours=100), name="old")
    fresh = offline_plan(created_at=NOW - timedelta(hours=1), name="fresh")
    for plan in (old, fresh):
        save_plan(wh, plan, now=plan.created_at)
    assert expire(wh, settings=settings, now=NOW) == [old.id]
    assert load_record(wh, old.id).status == "expired"
    assert load_record(wh, fresh.id).status == "proposed"


def test_rejected_plan_cannot_be_approved(wh, settings, alice):
    plan = offline_plan()
    save_plan(wh, plan, now=NOW)
    assert reject(wh, plan.id, principal=alice, settings=settings, reason="too many drains this week", now=NOW).status == "rejected"
    assert audit(wh, plan.id)[-1]["detail"] == "too many drains this week"
    with pytest.raises(PlanError, match="is rejected"):
        approve(wh, plan.id, principal=alice, settings=settings, now=NOW)
    with pytest.raises(PlanError, match="only a proposed or approved plan can be rejected"):
        reject(wh, plan.id, principal=alice, settings=settings, reason="again", now=NOW)


def test_unapproved_plan_is_never_applied(wh, settings, alice, unreachable):
    plan = offline_plan()
    save_plan(wh, plan, now=NOW)
    with pytest.raises(PlanError, match="is proposed; cannot apply it \\(approve it first\\)"):
        apply(wh, plan.id, principal=alice, settings=settings, cluster=unreachable, now=NOW)
    assert load_record(wh, plan.id).status == "proposed"
    assert unreachable.writes == []


def test_cli_approve_as_admin_and_viewer(tmp_path, capsys):
    from gpuledger.cli import main
    from gpuledger.warehouse import Warehouse

    config = tmp_path / "gpuledger.yaml"
    config.write_text(json.dumps({"access": {"roles": [
        {"subject": "alice", "role": "admin"}, {"subject": "bob", "role": "viewer"}]}}))
    path = tmp_path / "wh.duckdb"
    plan = offline_plan(created_at=datetime.now(UTC))
    with Warehouse.open(path) as wh:
        save_plan(wh, plan)
    base = ["--config", str(config), "--warehouse", str(path), "plans"]
    assert main([*base, "approve", plan.id, "--as", "bob", "--insecure-dev-identity"]) == 3
    err = capsys.readouterr().err
    assert err.strip() == f"gpuledger: error: user 'bob' may not approve plan {plan.id}: needs the admin role"
    assert main([*base, "approve", plan.id, "--as", "alice", "--insecure-dev-identity"]) == 0
    assert f"plan {plan.id}: approved" in capsys.readouterr().out
    with Warehouse.open(path, read_only=True) as wh:
        assert load_record(wh, plan.id).status == "approved"


def empty_quota_plan(created_at: datetime, name: str = "empty") -> Plan:
    """A plan that observes and changes nothing: its dry run and apply need no cluster request."""
    return Plan(
        id=f"quota-{name}", kind="quota", created_at=created_at, fingerprint=fingerprint_of(()),
        changes=QuotaChanges(quotas=(), cluster_queues=()),
        effect=Effect(), solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=30),
    )


def test_apply_needs_a_recent_preview(wh, settings, alice, unreachable):
    plan = empty_quota_plan(NOW)
    save_plan(wh, plan, now=NOW)
    approve(wh, plan.id, principal=alice, settings=settings, now=NOW)
    with pytest.raises(PlanError, match="preview it \\(dry run\\) first, then apply within 15 min"):
        apply(wh, plan.id, principal=alice, settings=settings, cluster=unreachable, now=NOW)
    assert load_record(wh, plan.id).status == "approved"
    preview = apply(wh, plan.id, principal=alice, settings=settings, cluster=unreachable, dry_run=True, now=NOW)
    assert preview.dry_run and preview.ok and load_record(wh, plan.id).status == "approved"
    # 16 minutes later the preview no longer counts; a fresh one does
    with pytest.raises(PlanError, match="preview it \\(dry run\\) first"):
        apply(wh, plan.id, principal=alice, settings=settings, cluster=unreachable,
              now=NOW + timedelta(minutes=16))
    apply(wh, plan.id, principal=alice, settings=settings, cluster=unreachable, dry_run=True,
          now=NOW + timedelta(minutes=20))
    done = apply(wh, plan.id, principal=alice, settings=settings, cluster=unreachable,
                 now=NOW + timedelta(minutes=30))
    assert done.status == "applied" and load_record(wh, plan.id).status == "applied"
    assert unreachable.writes == []


def test_cli_apply_refuses_an_unpreviewed_plan(tmp_path, capsys):
    from gpuledger.cli import main
    from gpuledger.warehouse import Warehouse

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    config = tmp_path / "gpuledger.yaml"
    config.write_text(json.dumps({"access": {"roles": [{"subject": "alice", "role": "admin"}]}}))
    path = tmp_path / "wh.duckdb"
    plan = empty_quota_plan(datetime.now(UTC))
    with Warehouse.open(path) as wh:
        save_plan(wh, plan)
    base = ["--config", str(config), "--warehouse", str(path), "plans"]
    apply_cmd = [*base, "apply", plan.id, "--as", "alice", "--insecure-dev-identity", "--kubeconfig", str(kubeconfig)]
    assert main([*base, "approve", plan.id, "--as", "alice", "--insecure-dev-identity"]) == 0
    capsys.readouterr()
    assert main(apply_cmd) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpuledger: error: plan {plan.id}: preview it (dry run) first") and "\n" not in err
    with Warehouse.open(path, read_only=True) as wh:
        assert load_record(wh, plan.id).status == "approved"
    assert main([*apply_cmd, "--dry-run"]) == 0
    assert "dry run: 0 write(s)" in capsys.readouterr().out
    assert main(apply_cmd) == 0
    assert "applied" in capsys.readouterr().out
    with Warehouse.open(path, read_only=True) as wh:
        assert load_record(wh, plan.id).status == "applied"
