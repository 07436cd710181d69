"""The plan contract: frozen model, JSON in NVIDIA's field names, the store and its transitions.

Cases:
- a plan is frozen (assignment raises) and its JSON round-trips to an equal plan;
- a MIG plan's JSON carries each node's mig-parted entry under `devices`, `mig-enabled`,
  `mig-devices`, and `mig_parted_config()` is a `version: v1` document keyed by the label value;
- a plan whose kind disagrees with its changes is refused;
- save → load returns an equal plan with status `proposed`; saving it again is a no-op; another
  body under the same id is refused;
- list_plans filters by status and kind, newest first;
- the transition table: every allowed move succeeds, every other move raises PlanError with
  both statuses named, terminal statuses allow nothing; applying → applying stores progress;
  progress is kept when a later move passes none;
- every status change appends an audit record;
- expire_plans expires only proposed/approved plans older than the limit;
- the fingerprint does not depend on the order of observed objects and changes with any state;
- rendering: the table names every changed GPU with before → after and the pods to evict.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pydantic
import pytest

from gpuledger.core.errors import PlanError
from gpuledger.optimizer.plan.contract import (
    ClusterQueueUpdate,
    Effect,
    GpuChange,
    GpuConfig,
    MigChanges,
    MigPartedGroup,
    NodeMigChange,
    ObservedObject,
    Plan,
    PodRef,
    QuotaChange,
    QuotaChanges,
    SolverInfo,
    fingerprint_of,
)
from gpuledger.optimizer.plan.render import plan_json, render_plan
from gpuledger.optimizer.plan.status import STATUSES, TERMINAL, TRANSITIONS
from gpuledger.optimizer.plan.store import (
    expire_plans,
    list_plans,
    load_plan,
    load_record,
    save_plan,
    set_status,
)
from gpuledger.warehouse import Warehouse

T0 = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)


def mig_plan(plan_id: str = "mig-1", created: datetime = T0) -> Plan:
    observed = (ObservedObject(kind="Node", name="n1", resource_version="41", state="abc"),)
    node = NodeMigChange(
        node="n1", model="H100-80GB", mig_config="gpuledger-1a2b3c",
        previous_mig_config="all-1g.10gb",
        mig_parted=(
            MigPartedGroup(devices=(0, 1), mig_enabled=True, mig_devices={"3g.40gb": 2}),
            MigPartedGroup(devices=(2,), mig_enabled=False),
        ),
        gpus_changed=(
            GpuChange(index=1, uuid="GPU-b",
                      before=GpuConfig(mig_enabled=True, mig_devices={"1g.10gb": 7}),
                      after=GpuConfig(mig_enabled=True, mig_devices={"3g.40gb": 2})),
        ),
        pods_to_evict=(PodRef(namespace="ml", pod="infer-0", gpu_index=1, profile="1g.10gb"),),
    )
    return Plan(
        id=plan_id, kind="mig", created_at=created, fingerprint=fingerprint_of(observed),
        observed=observed, changes=MigChanges(nodes=(node,)),
        effect=Effect(gpus_changed=1, gpus_freed=0),
        solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=5),
    )


def quota_plan(plan_id: str = "quota-1", created: datetime = T0) -> Plan:
    change = QuotaChange(cluster_queue="team-a", cohort="all", flavor="h100", resource="nvidia.com/gpu",
                         old_nominal=8, new_nominal=12, old_borrowing_limit=None, new_borrowing_limit=4)
    groups = ({"coveredResources": ["nvidia.com/gpu"],
               "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 12,
                                                            "borrowingLimit": 4}]}]},)
    return Plan(
        id=plan_id, kind="quota", created_at=created, fingerprint="f",
        changes=QuotaChanges(quotas=(change,), cluster_queues=(
            ClusterQueueUpdate(name="team-a", resource_version="7", resource_groups=groups),)),
        effect=Effect(pending_gpu_minutes_before=100.0, pending_gpu_minutes_after=40.0),
        solver=SolverInfo(status="OPTIMAL", wall_s=0.1, time_limit_s=5),
    )


@pytest.fixture
def wh(tmp_path: Path):
    with Warehouse.open(tmp_path / "w.duckdb") as w:
        yield w


def test_plan_is_frozen_and_round_trips():
    plan = mig_plan()
    with pytest.raises(pydantic.ValidationError):
        plan.id = "other"  # type: ignore[misc]
    assert Plan.from_json(plan.to_json()) == plan
    assert Plan.from_json(quota_plan().to_json()) == quota_plan()


def test_mig_json_uses_nvidia_field_names():
    body = json.loads(mig_plan().to_json())
    entry = body["changes"]["nodes"][0]["mig_parted"]
    assert entry[0] == {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}
    assert entry[1]["mig-enabled"] is False
    doc = mig_plan().changes.mig_parted_config()  # type: ignore[union-attr]
    assert doc == {"version": "v1", "mig-configs": {"gpuledger-1a2b3c": [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [2], "mig-enabled": False},
    ]}}


def test_kind_must_match_changes():
    with pytest.raises(pydantic.ValidationError, match="carries quota changes"):
        Plan(id="x", kind="mig", created_at=T0, fingerprint="f", changes=quota_plan().changes,
             effect=Effect(), solver=SolverInfo(status="OPTIMAL", wall_s=0, time_limit_s=1))


def test_a_deadline_while_reading_a_plan_is_not_a_bad_plan(monkeypatch):
    """The command's deadline can fire while a kind module imports; it must stay a time limit."""
    from gpuledger.core.errors import TimeLimitError
    from gpuledger.optimizer.plan import contract

    def out_of_time(name: str) -> None:
        raise TimeLimitError("optimize mig ran past --time-limit 10 s")

    monkeypatch.setattr(contract.PLAN_KINDS, "get", out_of_time)
    with pytest.raises(TimeLimitError, match="time-limit"):
        Plan.from_json(mig_plan().to_json())


def test_save_load_round_trip(wh):
    plan = mig_plan()
    save_plan(wh, plan, now=T0)
    assert load_plan(wh, plan.id) == plan
    assert load_record(wh, plan.id).status == "proposed"
    save_plan(wh, plan, now=T0)  # idempotent
    assert wh.count("plans") == 1
    other = mig_plan().model_copy(update={"fingerprint": "different"})
    with pytest.raises(PlanError, match="already stored"):
        save_plan(wh, other)
    with pytest.raises(PlanError, match="not found"):
        load_plan(wh, "nope")


def test_list_filters_and_orders(wh):
    save_plan(wh, mig_plan("mig-old", T0))
    save_plan(wh, quota_plan("quota-new", T0 + timedelta(hours=1)))
    set_status(wh, "mig-old", "approved")
    assert [r.plan.id for r in list_plans(wh)] == ["quota-new", "mig-old"]
    assert [r.plan.id for r in list_plans(wh, "approved")] == ["mig-old"]
    assert [r.plan.id for r in list_plans(wh, kind="quota")] == ["quota-new"]
    with pytest.raises(PlanError, match="unknown"):
        list_plans(wh, "bogus")


def _path_to(target: str) -> list[str]:
    """A shortest sequence of statuses from proposed to `target` (breadth-first over TRANSITIONS)."""
    frontier = [["proposed"]]
    seen = {"proposed"}
    while frontier:
        path = frontier.pop(0)
        if path[-1] == target:
            return path[1:]
        for nxt in sorted(TRANSITIONS[path[-1]]):  # type: ignore[index]
            if nxt not in seen:
                seen.add(nxt)
                frontier.append([*path, nxt])
    raise AssertionError(target)


@pytest.mark.parametrize("current", STATUSES)
def test_transition_table_is_enforced(tmp_path, current):
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        for i, new in enumerate(STATUSES):
            pid = f"p{i}"
            save_plan(wh, mig_plan(pid))
            for step in _path_to(current):
                set_status(wh, pid, step)
            if new in TRANSITIONS[current]:
                assert set_status(wh, pid, new).status == new
            else:
                with pytest.raises(PlanError, match=f"from {current} to {new}"):
                    set_status(wh, pid, new)
                assert load_record(wh, pid).status == current
    if current in TERMINAL:
        assert not TRANSITIONS[current]


def test_progress_is_stored_and_kept(wh):
    save_plan(wh, mig_plan())
    set_status(wh, "mig-1", "approved")
    set_status(wh, "mig-1", "applying", {"done": []})
    rec = set_status(wh, "mig-1", "applying", {"done": ["n1"]})
    assert rec.progress == {"done": ["n1"]}
    rec = set_status(wh, "mig-1", "applied")
    assert rec.progress == {"done": ["n1"]}


def test_status_changes_are_audited(wh):
    save_plan(wh, mig_plan(), actor="optimizer")
    set_status(wh, "mig-1", "approved", actor="alice")
    rows = wh.query("SELECT actor, action, after_state FROM audit_log ORDER BY seq").rows()
    assert rows[0][:2] == ("optimizer", "plan.propose")
    assert rows[1][:2] == ("alice", "plan.status")
    assert json.loads(rows[1][2]) == {"status": "approved"}


def test_expire_only_old_open_plans(wh):
    save_plan(wh, mig_plan("old", T0))
    save_plan(wh, mig_plan("young", T0 + timedelta(hours=70)))
    save_plan(wh, mig_plan("old-applied", T0))
    for s in ("approved", "applying", "applied"):
        set_status(wh, "old-applied", s)
    expired = expire_plans(wh, timedelta(hours=72), now=T0 + timedelta(hours=73))
    assert expired == ["old"]
    assert load_record(wh, "young").status == "proposed"
    assert load_record(wh, "old-applied").status == "applied"


def test_fingerprint_order_independent_and_sensitive():
    a = ObservedObject(kind="Node", name="a", resource_version="1", state="s1")
    b = ObservedObject(kind="Node", name="b", resource_version="2", state="s2")
    assert fingerprint_of((a, b)) == fingerprint_of((b, a))
    assert fingerprint_of((a, b)) != fingerprint_of((a, b.model_copy(update={"state": "s3"})))
    assert fingerprint_of((a, b)) != fingerprint_of((a, b.model_copy(update={"resource_version": "3"})))


def test_rendering_names_changes():
    text = render_plan(mig_plan(), "proposed")
    assert "7×1g.10gb" in text and "2×3g.40gb" in text and "ml/infer-0" in text
    assert "gpuledger-1a2b3c" in text
    qtext = render_plan(quota_plan())
    assert "8 → 12" in qtext and "- → 4" in qtext
    assert json.loads(plan_json(quota_plan()))["id"] == "quota-1"
