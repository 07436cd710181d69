"""What a MIG plan costs, counted alike for the plan and its first-fit baselines.

Case: two whole A100s, demand 2 × 1g.10gb + 1 × 3g.40gb. The plan fills one card to a
count-maximal layout (4 × 1g + 3g: two 1g instances nobody asked for); first-fit creates only
the three instances and strands 2 slices. By hand: 7 slices per card, 1g = 1, 3g = 3 compute
slices, so each side leaves 7 − (2 × 1 + 3) = 2 slices serving no demand: the plan as spare
instances, first-fit as stranded slices. Also: the per-GPU before/after layout is in the plan.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gpuledger.core.config import Settings
from gpuledger.optimizer.mig import MigOptions, plan_mig
from gpuledger.optimizer.mig_input import Demand, Fleet, Gpu, ModelDemand, Node
from gpuledger.optimizer.plan import MigChanges
from gpuledger.optimizer.plan_render import render_plan

A100 = "A100-80GB"


def test_spare_instances_and_stranded_slices_count_alike():
    gpus = tuple(Gpu(node="n0", index=i, model=A100, config=None) for i in range(2))
    demand = Demand((ModelDemand(A100, {"1g.10gb": 2, "3g.40gb": 1}, 0),))
    plan = plan_mig(Fleet((Node(name="n0", gpus=gpus),)), demand, MigOptions(time_limit_s=10), Settings(),
                    datetime(2026, 11, 5, tzinfo=UTC))
    assert isinstance(plan.changes, MigChanges)
    (node,) = plan.changes.nodes
    (gpu,) = node.gpus_changed
    after = dict(gpu.after.mig_devices)
    spare = {p: n - {"1g.10gb": 2, "3g.40gb": 1}.get(p, 0) for p, n in after.items()}
    slices = {"1g.10gb": 1, "3g.40gb": 3}
    e = plan.effect
    assert e.spare_instances == sum(spare.values())
    assert e.spare_slices == sum(slices[p] * n for p, n in spare.items())
    unused_plan = (e.slices_stranded_after or 0) + (e.spare_slices or 0)
    for b in plan.baselines:
        f = b.figures
        assert f["spare_instances"] == 0  # first-fit creates only what is asked for
        assert int(f["slices_stranded_after"] or 0) + int(f["spare_slices"] or 0) == unused_plan == 7 - 5
    text = render_plan(plan)
    assert "instances nobody asked for" in text and gpu.before.label() == "whole (MIG off)"
    assert f"{gpu.before.label()}" in text and gpu.after.label() in text
