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


IN_SAMPLE = "in-sample: the fitting history, hard quotas (no borrowing); not the expected effect"
DEMO_FIGURES = {  # the 256-GPU demo's quota plan, GPU-minutes as the plan stores them (issue 32)
    "this plan (held out, hard quotas: no borrowing)": (13_061_412.0, 95_199.4, 104_186.2),
    IN_SAMPLE: (17_418_126.8, 120_794.7, 135_094.6),
    "this plan with cohort borrowing (held out)": (12_966_212.6, 0.0, 0.0),
    "nominal proportional to mean demand (held out, hard quotas: no borrowing)": (13_072_881.4, 106_668.8, None),
}
KEYS = ("idle_quota_gpu_minutes_after", "pending_gpu_minutes_after", "pending_gpu_minutes_before")


def _quota_plan_with_baselines():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from gpuledger.optimizer.plan.contract import Baseline
    from gpuledger.optimizer.plan.evaluation import OriginResult
    from tests.optimizer.test_plan_store import quota_plan

    (ours, *others) = DEMO_FIGURES.items()
    t = datetime(2026, 10, 1, tzinfo=UTC)
    origin = OriginResult(start=t, end=t, fit_days=21, pending_before=1.0, pending_after=1.0,
                          pending_before_borrowing=0.0, pending_after_borrowing=0.0, borrowed_before=0.0,
                          borrowed_after=0.0)
    base = quota_plan()
    return base.model_copy(update={
        "effect": Effect(**dict(zip(KEYS, ours[1], strict=True))),
        "evaluation": Evaluation(method="rolling origin", origins=(origin,), headline="h", reason="r"),
        "baselines": tuple(Baseline(name=name, figures=dict(zip(KEYS, figures, strict=True)),
                                    note="fitted on the same days" if name == IN_SAMPLE else "")
                           for name, figures in others)})


def test_quota_baselines_read_gpu_hours_within_the_terminal(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`optimize quota`'s baselines table printed 136 columns at the demo's figures, raw keys as
    headers and GPU-minutes beside the effect's GPU-hours. At 120 and 80 columns: human headers in
    GPU-hours, every figure whole on its row (minutes / 60, 3 decimals like `bill`'s GPU-hours),
    no line over the width; `-o wide` names every method whole."""
    from gpuledger.commands._plans_view import plan_text

    plan = _quota_plan_with_baselines()
    for width in (120, 80):
        monkeypatch.setenv("COLUMNS", str(width))
        text = plan_text(plan, None, "table")
        section = next(block for block in text.split("\n\n") if "method" in block and "─" in block)
        table = section.split("\nin-sample: the fitting history, hard quotas (no borrowing); not the expected effect:")[0]
        # the whole plan within 120 columns; at 80 the baselines table (the notes fold at 116)
        assert max(len(line) for line in (text if width == 120 else table).splitlines()) <= width, width
        assert "gpu_minutes" not in section and "GPU-minutes" not in section and "GPU-hours" in section
        lines = section.splitlines()
        rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
        rows = lines[rule + 1:rule + 1 + len(DEMO_FIGURES)]
        for row, (idle, after, before) in zip(rows, DEMO_FIGURES.values(), strict=True):
            # the effect's order: pending before, pending after, idle quota after
            want = ["-" if m is None else f"{m / 60:,.3f}" for m in (before, after, idle)]
            assert row.split()[-3:] == want, (width, row)  # whole numbers, in hours, in their columns
    wide = plan_text(plan, None, "wide")
    assert all(name in wide for name in DEMO_FIGURES)
