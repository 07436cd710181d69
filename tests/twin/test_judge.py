"""A stored quota plan judged on the real twin (issue 36 step 2): `python -m tools.twin.judge`'s
`judge()` on the tiny case of tests/twin/judge_case.py.

The window is cut from the case's warehouse, replayed on a fresh twin (kube-scheduler, Job
controller, Kueue v0.17.0, KWOK) under today's quota (1 GPU) and under the plan's (2 GPUs). Each
run's admission order and the jobs Kueue left pending must be those `judge_case.expected` computes
from Kueue's documented semantics; the effect attached to the stored plan must say so in figures
(pending GPU-minutes sampled each simulated minute: 8 before, 2 after, within one GPU-minute of
control-loop latency at 10 s per simulated minute).
"""

from __future__ import annotations

from pathlib import Path

from gpuledger.optimizer.plan.store import load_record
from gpuledger.warehouse import Warehouse
from tests.twin.judge_case import MINUTES, PLAN_ID, S, build_warehouse, expected
from tools.twin.judge import judge
from tools.twin_build.versions import Layout

SECONDS_PER_MINUTE = 10.0


def _case_names(jobs: list[str] | set[str]) -> list[str]:
    return sorted(j.split("-")[-1] for j in jobs) if isinstance(jobs, set) else [j.split("-")[-1] for j in jobs]


def test_the_plan_judged_on_the_twin_matches_kueues_semantics(twin_layout: Layout, tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    build_warehouse(path)
    done = judge(path, PLAN_ID, start=S, minutes=MINUTES, seconds_per_minute=SECONDS_PER_MINUTE)
    for run, nominal in ((done.before, 1), (done.after, 2)):
        order, waited, _ = expected(nominal)
        seen = [(e.what, e.job, round(run.minute(e), 2)) for e in run.events]
        print(f"quota {nominal}: watched {seen}")
        assert run.finished, seen
        assert _case_names(run.order("admitted")) == order, seen
        assert _case_names(run.jobs_with("pending")) == sorted(waited), seen
        assert not run.jobs_with("preempted"), seen
    (team,) = done.effect.teams
    print("effect:", team)
    assert abs(team.twin_before - expected(1)[2]) <= 1 and abs(team.twin_after - expected(2)[2]) <= 1
    with Warehouse.open(path, read_only=True) as wh:
        assert load_record(wh, PLAN_ID).twin_effect == done.effect
