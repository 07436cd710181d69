"""A plan's effect measured on the scheduling twin, stored beside the plan and shown beside the backtest.

Cases:
- storage: a stored quota plan has no twin effect (read as None, the `plans show` JSON says null);
  attaching one round-trips equal through the warehouse, with a `plan.twin_effect` audit row; a
  re-run replaces it; an effect measured on another plan body (fingerprint) or older than the one
  stored is refused and leaves it as it was; a missing plan is a PlanError;
- the plan body is untouched by the attach (saving the same plan again is still a no-op);
- `plans show` text: a quota plan says "measured by:" with the model backtest's label and "twin:
  not measured on the twin" when none is stored; with one, the twin's label names the scheduler,
  Kueue version, KWOK and the window, and the table puts per team the backtest, the model on the
  twin's window and the twin side by side (the expected cells computed here from the figures);
  a MIG plan shows no twin section;
- the Plans page layout function: the same labels, the table only once measured.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.core.errors import ConflictingPlanError, PlanError
from gpuledger.optimizer.plan.contract import Plan
from gpuledger.optimizer.plan.evaluation import Evaluation, OriginResult, TeamChange
from gpuledger.optimizer.plan.render import plan_json, render_plan
from gpuledger.optimizer.plan.store import attach_twin_effect, load_record, save_plan
from gpuledger.optimizer.plan.twin_effect import TwinEffect, TwinTeam
from gpuledger.warehouse import Warehouse
from tests.optimizer.test_plan_store import T0, mig_plan, quota_plan

W0 = datetime(2026, 11, 21, 4, 0, tzinfo=UTC)
MIG = "nvidia.com/mig-1g.10gb"


def _evaluated_plan() -> Plan:
    origin = OriginResult(start=T0 - timedelta(days=7), end=T0, fit_days=21, pending_before=1800.0,
                          pending_after=900.0, pending_before_borrowing=0.0, pending_after_borrowing=0.0,
                          borrowed_before=0.0, borrowed_after=0.0)
    teams = (TeamChange(team="team-a", gpus_before=8, gpus_after=12, floor_gpus=4, pending_before=1200.0,
                        pending_after=600.0, demand=10_000.0),
             TeamChange(team="team-b", gpus_before=6, gpus_after=6, floor_gpus=3, pending_before=600.0,
                        pending_after=300.0, demand=5_000.0))
    e = Evaluation(method="rolling origin", origins=(origin,), held_out_days=7, pending_before=1800.0,
                   pending_after=900.0, teams=teams, headline="h", reason="r")
    return quota_plan().model_copy(update={"evaluation": e})


def _effect(plan: Plan, *, at: datetime = T0, fingerprint: str | None = None, twin_a: float = 30.0) -> TwinEffect:
    return TwinEffect(
        plan_id=plan.id, plan_fingerprint=fingerprint or plan.fingerprint,
        measured_by="kube-scheduler + Kueue v0.17.0 on KWOK",
        versions={"kubernetes": "v1.37.2", "kueue": "v0.17.0", "kwok": "v0.8.0"}, source_commit="abc",
        window_start=W0, window_end=W0 + timedelta(minutes=30), seconds_per_minute=10.0, workloads=12,
        skipped=1, measured_at=at,
        teams=(TwinTeam(team="team-a", twin_before=twin_a, twin_after=6.0, model_before=24.0, model_after=6.0),
               TwinTeam(team="search", resource=MIG, twin_before=26.0, twin_after=0.0, model_before=26.0,
                        model_after=0.0),
               TwinTeam(team="team-b", resource=MIG, twin_before=0.0, twin_after=0.0, model_before=0.0,
                        model_after=0.0)))


@pytest.fixture
def wh(tmp_path: Path):
    with Warehouse.open(tmp_path / "w.duckdb") as w:
        yield w


def test_stored_plan_without_twin_effect_reads_none(wh) -> None:
    save_plan(wh, quota_plan(), now=T0)
    record = load_record(wh, "quota-1")
    assert record.twin_effect is None
    assert json.loads(plan_json(record))["twin_effect"] is None


def test_twin_effect_round_trips_and_is_audited(wh) -> None:
    plan = _evaluated_plan()
    save_plan(wh, plan, now=T0)
    effect = _effect(plan)
    record = attach_twin_effect(wh, effect, actor="judge", now=T0)
    assert record.twin_effect == effect and load_record(wh, plan.id).twin_effect == effect
    assert record.plan == plan  # the frozen body is untouched
    save_plan(wh, plan, now=T0)  # still the same body: a no-op, not "another plan"
    audit = wh.query("SELECT actor, action, detail FROM audit_log WHERE plan_id = ? ORDER BY seq", [plan.id])
    assert audit.rows()[-1] == ("judge", "plan.twin_effect", "measured by kube-scheduler + Kueue v0.17.0 on KWOK")
    assert json.loads(plan_json(load_record(wh, plan.id)))["twin_effect"]["teams"][0]["twin_before"] == 30.0


def test_a_rerun_replaces_and_the_guards_refuse(wh) -> None:
    plan = _evaluated_plan()
    save_plan(wh, plan, now=T0)
    attach_twin_effect(wh, _effect(plan, at=T0), now=T0)
    later = _effect(plan, at=T0 + timedelta(hours=1), twin_a=42.0)
    attach_twin_effect(wh, later, now=T0)
    assert load_record(wh, plan.id).twin_effect == later
    with pytest.raises(ConflictingPlanError, match="measured after"):
        attach_twin_effect(wh, _effect(plan, at=T0 + timedelta(minutes=30)), now=T0)
    with pytest.raises(PlanError, match="another; not attached"):
        attach_twin_effect(wh, _effect(plan, at=T0 + timedelta(hours=2), fingerprint="other"), now=T0)
    with pytest.raises(PlanError, match="not found"):
        attach_twin_effect(wh, _effect(plan).model_copy(update={"plan_id": "nope"}), now=T0)
    assert load_record(wh, plan.id).twin_effect == later
    actions = wh.query("SELECT count(*) FROM audit_log WHERE action = 'plan.twin_effect'").item()
    assert actions == 2


def _hours(before: float, after: float, digits: int) -> str:
    change = f" ({after / before - 1:+.1%})" if before else ""
    return f"{before / 60:,.{digits}f} → {after / 60:,.{digits}f}{change}"


def _section(text: str) -> list[str]:
    start = text.index("measured by:")
    return text[start:].split("\n\n", maxsplit=1)[0].splitlines()


def test_plans_show_says_not_measured_without_a_twin_effect() -> None:
    plan = _evaluated_plan()
    lines = _section(render_plan(plan, "proposed"))
    assert lines == ["measured by:",
                     "  model backtest: 7 held-out days, hard quotas (no borrowing), rolling origin",
                     "  twin: not measured on the twin"]
    assert "measured by:" not in render_plan(mig_plan(), "proposed")


def test_plans_show_puts_backtest_model_and_twin_side_by_side() -> None:
    plan = _evaluated_plan()
    text = render_plan(plan, "proposed", twin=_effect(plan))
    head = " ".join(line.strip() for line in _section(text))
    assert ("twin: kube-scheduler + Kueue v0.17.0 on KWOK, window 2026-11-21 04:00–04:30 UTC, cohorts removed "
            "(no borrowing), 12 workloads (1 skipped), 10 s per simulated minute; measured 2026-11-05 12:00 UTC"
            ) in head
    units, *table = text[text.index("measured by:"):].split("\n\n")[1].splitlines()
    assert units.startswith("pending GPU-hours before → after under the plan")
    assert [c.strip() for c in table[0].split("  ") if c.strip()] == [
        "team", "model backtest (held out)", "model on the twin's window", "twin"]
    assert max(len(line) for line in text.splitlines()) <= 120
    cells = {line.split("  ")[0]: [c.strip() for c in line.split("  ") if c.strip()] for line in table[2:]}
    assert cells["team-a"][1:] == [_hours(1200, 600, 1), _hours(24, 6, 2), _hours(30, 6, 2)]
    assert cells["team-b"][1:] == [_hours(600, 300, 1), "–", "–"]
    assert cells["search mig-1g.10gb"][1:] == ["–", _hours(26, 0, 2), _hours(26, 0, 2)]
    assert "team-b mig-1g.10gb" not in cells  # nothing pending on either side: counted below, not listed
    assert text[text.index("measured by:"):].split("\n\n")[1].splitlines()[-1] == (
        "not listed: 1 team MIG profile(s), nothing pending on the twin or in the model")
    assert cells["all teams (whole GPUs)"][1:] == [_hours(1800, 900, 1), _hours(24, 6, 2), _hours(30, 6, 2)]


def _texts(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    children = getattr(node, "children", None)
    if children is None:
        return []
    return [t for child in (children if isinstance(children, list) else [children]) for t in _texts(child)]


def test_plans_page_labels_both_and_shows_the_table_once_measured() -> None:
    from gpuledger.dashboards.pages.plan_twin import twin_frame, twin_section
    from gpuledger.optimizer.plan.render_twin import side_by_side

    plan = _evaluated_plan()
    assert twin_section(None) == []
    absent = twin_section(side_by_side(plan.evaluation, None))
    assert [getattr(p, "id", None) for p in absent] == [None, "plan-measured-by"]
    assert _texts(absent[1]) == ["model backtest: 7 held-out days, hard quotas (no borrowing), rolling origin",
                                 "twin: not measured on the twin"]
    view = side_by_side(plan.evaluation, _effect(plan))
    shown = twin_section(view)
    assert _texts(shown[1])[1].startswith("twin: kube-scheduler + Kueue v0.17.0 on KWOK, window 2026-11-21 04:00")
    assert shown[3].id == "plan-twin-table"
    rows = {r["team"]: r for r in twin_frame(view).iter_rows(named=True)}
    assert rows["team-a"]["twin"] == _hours(30, 6, 2) and rows["team-a"]["backtest"] == _hours(1200, 600, 1)
    assert "model on the twin's window" in _texts(shown[3])
    assert _texts(shown[4]) == ["not listed: 1 team MIG profile(s), nothing pending on the twin or in the model"]
    assert "team-b mig-1g.10gb" not in rows


def test_the_plan_detail_carries_the_section() -> None:
    """The selected plan's detail (`render`) holds the "Measured by" part after the team table."""
    import polars as pl

    from gpuledger.dashboards.pages.plans import PlansView, render
    from gpuledger.optimizer.plan.render_twin import side_by_side

    plan = _evaluated_plan()
    empty = pl.DataFrame()
    plans = pl.DataFrame({"plan_id": [plan.id], "kind": ["quota"], "status": ["proposed"], "created_at": [T0],
                          "gpus_freed": [None], "pending_before": [1.0], "pending_after": [0.5], "saving": [None]})
    v = PlansView(currency="USD", can_act=False, plans=plans, selected=plan.id, status="proposed", kind="quota",
                  created="2026-11-05 12:00 UTC", effect=empty, diff=empty, warnings=(), solver="cp-sat",
                  preview=None, rollout=None, plan_audit=empty, audit=empty, hrefs={plan.id: "/plans"},
                  cluster=False, measured=side_by_side(plan.evaluation, _effect(plan)))
    texts = _texts(render(v))
    at = texts.index("Measured by")
    assert texts[at + 1] == "model backtest: 7 held-out days, hard quotas (no borrowing), rolling origin"
    assert texts[at + 2].startswith("twin: kube-scheduler + Kueue v0.17.0 on KWOK")
