"""`plans show` as people read it (issue 32 leftovers).

Cases:
- the team table of a quota plan stays within 120 columns however long a floor's reasoning is:
  the table carries the floor in GPUs, the full reasoning is printed in full below it;
- the effect's idle quota and pending time read in GPU-hours (minutes / 60), as on every other
  surface, never "13,082,209.60 GPU-minutes".
"""

from __future__ import annotations

from gpuledger.optimizer.plan.contract import Effect
from gpuledger.optimizer.plan.evaluation import Evaluation, TeamChange
from gpuledger.optimizer.plan.render import render_effect, render_evaluation

LONG = "; ".join(f"team-a-q{i}/default {i}: raised: its held-out days needed {i} + 2 for bursts (repair)"
                 for i in range(1, 5))


def _evaluation() -> Evaluation:
    teams = (
        TeamChange(team="team-a", gpus_before=14, gpus_after=12, floor_gpus=10, pending_before=1200,
                   pending_after=1300, demand=60_000, floor_note=LONG),
        TeamChange(team="team-b", gpus_before=4, gpus_after=4, floor_gpus=3, pending_before=0,
                   pending_after=0, demand=6_000, floor_note="3: p90 of its demand"),
    )
    return Evaluation(method="rolling origin", teams=teams, headline="h", reason="r")


def test_team_table_fits_120_columns_and_keeps_the_reasoning() -> None:
    text = render_evaluation(_evaluation())
    assert len(LONG) > 200
    assert max(len(line) for line in text.splitlines()) <= 120
    row = next(line for line in text.splitlines() if line.startswith("team-a "))
    assert row.split()[:5] == ["team-a", "14", "→", "12", "-2"] and " 10 " in row
    assert LONG in text.replace("\n    ", " ")  # the full reasoning, folded, nothing cut
    assert "3: p90 of its demand" in text


def test_effect_reads_gpu_hours() -> None:
    effect = Effect(idle_quota_gpu_minutes_before=13_082_209.6, idle_quota_gpu_minutes_after=600.0,
                    pending_gpu_minutes_before=90.0)
    text = render_effect(effect)
    assert "GPU-minutes" not in text
    lines = {line.rsplit(None, 1)[0].strip(): line.rsplit(None, 1)[1] for line in text.splitlines()[2:]}
    assert lines["idle quota GPU-hours before (held out, no borrowing)"] == f"{13_082_209.6 / 60:,.2f}"
    assert lines["idle quota GPU-hours after (held out, no borrowing)"] == "10"
    assert lines["pending GPU-hours before (held out, no borrowing)"] == "1.50"


def test_mig_table_fits_120_columns_and_names_every_pod() -> None:
    """61 pods to evict on one GPU (10 serving): the table's cell counts them, the list below it
    names every one, folded, within 120 columns."""
    from gpuledger.optimizer.plan.contract import MigChanges, NodeMigChange, PodRef
    from gpuledger.optimizer.plan.render import render_plan
    from tests.optimizer.test_plan_store import mig_plan

    base = mig_plan()
    assert isinstance(base.changes, MigChanges)
    pods = tuple(PodRef(namespace="research", pod=f"research-job-s28cwl-{i:05d}", gpu_index=1,
                        profile="1g.10gb", serving=i < 10) for i in range(61))
    node = NodeMigChange(**{**base.changes.nodes[0].model_dump(), "pods_to_evict": pods})
    plan = base.model_copy(update={"changes": MigChanges(nodes=(node,))})
    text = render_plan(plan, "proposed")
    assert max(len(line) for line in text.splitlines()) <= 120
    row = next(line for line in text.splitlines() if line.startswith("n1 "))
    assert row.endswith("61 pods, 10 serving")
    flat = text.replace("\n    ", " ")
    assert all(f"research/research-job-s28cwl-{i:05d}" in flat for i in range(61))
    assert "research/research-job-s28cwl-00000 (serving)" in flat
