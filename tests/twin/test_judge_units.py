"""The twin judge's own logic, without the twin (runs everywhere).

Cases:
- the plan's quotas go into the window: its `old_*` quotas before, `new_*` after; the cohorts are
  removed unless borrowing is kept; a quota the warehouse stores at another value than the plan's
  'before' is counted;
- the default window is the busiest slot of recorded pending, earliest on a tie;
- a workload larger than anything its queue can hold (nominal, plus the borrowing limit or the
  cohort's nominal in a cohort; on its pinned flavor or on any flavor covering its resource) is
  named in the note, before and after the plan apart (the demo plan's biology gap, decision 0246);
- `judge` end to end on the case of tests/twin/judge_case.py (its warehouse, its stored plan) with
  a stand-in runner replaying the case's Kueue semantics: the effect attached to the stored plan
  carries the before/after pending GPU-minutes computed in judge_case (8 and 2), the model's figure
  for the same demand, the versions and the window; a second run replaces it; `plans show` reads it.
"""

from __future__ import annotations

from datetime import timedelta

from gpuledger.optimizer.plan.render import render_plan
from gpuledger.optimizer.plan.store import load_record
from gpuledger.warehouse import Warehouse
from tests.twin.judge_case import JOBS, MINUTES, PLAN_ID, S, build_warehouse, expected, plan, semantic_runner
from tools.twin.flavors import FlavorQuota
from tools.twin.judge import (
    MEASURED_BY,
    admissibility_note,
    busiest_start,
    judge,
    never_admissible,
    stored_differs,
    with_plan_quotas,
)
from tools.twin.replay import QueueSpec, Window, WorkloadSpec

GPU = "nvidia.com/gpu"


def _window(nominal: int = 1) -> Window:
    queues = (QueueSpec("cq-a", nominal, "lab", quotas=(FlavorQuota("f", GPU, nominal),)),
              QueueSpec("cq-b", 3, "lab", quotas=(FlavorQuota("f", GPU, 3),)))
    return Window(queues, (), (WorkloadSpec("w1", 0, 1, "cq-a", 1),))


def test_the_plans_quotas_go_into_the_window() -> None:
    changes = plan().changes
    before = with_plan_quotas(_window(), changes, "old", borrowing=False)  # type: ignore[arg-type]
    after = with_plan_quotas(_window(), changes, "new", borrowing=True)  # type: ignore[arg-type]
    assert [(q.name, q.nominal_gpus, q.quotas[0].nominal, q.cohort) for q in before.queues] == [
        ("cq-a", 1, 1, None), ("cq-b", 3, 3, None)]
    assert [(q.name, q.nominal_gpus, q.quotas[0].nominal, q.cohort) for q in after.queues] == [
        ("cq-a", 2, 2, "lab"), ("cq-b", 3, 3, "lab")]
    assert stored_differs(_window(1), changes) == 0  # type: ignore[arg-type]
    assert stored_differs(_window(5), changes) == 1  # type: ignore[arg-type]


def test_the_default_window_is_the_busiest_slot() -> None:
    t = [S + timedelta(minutes=m) for m in range(0, 90, 10)]
    samples = {"a": (t, [0, 0, 0, 2, 2, 0, 0, 0, 0]), "b": (t, [0, 0, 0, 0, 0, 0, 3, 1, 0])}
    assert busiest_start(samples, S, S + timedelta(minutes=90), 30) == S + timedelta(minutes=30)
    tie = {"a": (t, [0, 2, 0, 0, 0, 0, 0, 2, 0])}
    assert busiest_start(tie, S, S + timedelta(minutes=90), 30) == S
    assert busiest_start({"a": (t, [0] * 9)}, S, S + timedelta(minutes=90), 30) == S


def test_judge_attaches_the_effect_to_the_stored_plan(tmp_path) -> None:
    path = tmp_path / "wh.duckdb"
    build_warehouse(path)
    _, _, before = expected(1)
    _, _, after = expected(2)
    done = judge(path, PLAN_ID[:12], start=S, minutes=MINUTES, seconds_per_minute=1.0, runner=semantic_runner)
    (team,) = done.effect.teams
    assert (team.team, team.resource, team.twin_before, team.twin_after) == ("cq-a", GPU, before, after)
    assert (before, after) == (8.0, 2.0)
    assert team.model_before >= 0 and team.model_after <= team.model_before
    cut = sorted((w.arrival_min, w.run_min, w.flavor) for w in done.before_window.workloads)
    assert cut == [(arrive, run, "f") for _, arrive, run in JOBS]  # arrivals inferred back from the record
    assert [q.quotas[0].nominal for q in (*done.before_window.queues, *done.after_window.queues)] == [1, 2]
    assert done.effect.measured_by == MEASURED_BY and done.effect.versions["kueue"] == "v0.17.0"
    assert (done.effect.window_start, done.effect.window_end) == (S, S + timedelta(minutes=MINUTES))
    with Warehouse.open(path, read_only=True) as wh:
        record = load_record(wh, PLAN_ID)
    assert record.twin_effect == done.effect and record.status == "proposed"
    again = judge(path, PLAN_ID, start=S, minutes=MINUTES, seconds_per_minute=1.0, runner=semantic_runner)
    with Warehouse.open(path, read_only=True) as wh:
        record = load_record(wh, PLAN_ID)
    assert record.twin_effect == again.effect != done.effect  # measured later: replaced
    text = render_plan(record.plan, record.status, twin=record.twin_effect)
    assert f"twin: {MEASURED_BY}, window 2026-03-01 00:00–00:12 UTC" in text
    assert again.effect.model_copy(update={"measured_at": done.effect.measured_at}) == done.effect


def test_workloads_no_quota_can_hold_are_named() -> None:
    # cq-a: f 1 GPU, g 4 GPUs; cq-b: f 3 GPUs. Alone (no cohort): a 2-GPU job pinned to f fits
    # nowhere (1 < 2); unpinned it fits g (4); 5 GPUs fit neither (at most 4). In cohort "lab"
    # without borrowing limits cq-a may hold all of f (1 + 3 = 4), so the pinned 2 fits; with a
    # borrowing limit of 0 it may hold 1 again.
    def window(cohort: str | None, limit: int | None) -> Window:
        queues = (QueueSpec("cq-a", 5, cohort, quotas=(FlavorQuota("f", GPU, 1, limit), FlavorQuota("g", GPU, 4))),
                  QueueSpec("cq-b", 3, cohort, quotas=(FlavorQuota("f", GPU, 3),)))
        jobs = (WorkloadSpec("pinned", 0, 2, "cq-a", 5, flavor="f"), WorkloadSpec("pinned2", 1, 2, "cq-a", 5, flavor="f"),
                WorkloadSpec("free", 0, 2, "cq-a", 5), WorkloadSpec("big", 0, 5, "cq-a", 5),
                WorkloadSpec("b", 0, 3, "cq-b", 5))
        return Window(queues, (), jobs)

    assert never_admissible(window(None, None)) == [
        f"2 x cq-a: 2 {GPU} on f (at most 1)", f"cq-a: 5 {GPU} on g (at most 4)"]
    assert never_admissible(window("lab", None)) == [f"cq-a: 5 {GPU} on f (at most 4)"]
    assert never_admissible(window("lab", 0)) == [f"2 x cq-a: 2 {GPU} on f (at most 1)",
                                                  f"cq-a: 5 {GPU} on g (at most 4)"]
    both = admissibility_note({"old": window(None, None), "new": window(None, None)})
    assert both.startswith("Never admissible under either quota set") and "2 x cq-a: 2" in both
    apart = admissibility_note({"old": window(None, None), "new": window("lab", None)})
    assert "under the plan's 'before' quotas: 2 x cq-a" in apart and "'after' quotas: cq-a: 5" in apart
    assert admissibility_note({"old": _window(), "new": _window()}) == ""
