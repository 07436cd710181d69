"""What a MIG plan costs, counted alike for the plan and its first-fit baselines.

Case: two whole A100s, demand 2 × 1g.10gb + 1 × 3g.40gb (5 of a card's 7 compute slices).
- default (`plans.spare_instances: false`): the plan creates exactly those three instances on
  one card (a partial layout, 2 slices left free), like first-fit;
- `plans.spare_instances: true`: the plan fills that card to a count-maximal layout (4 × 1g +
  3g: two 1g instances nobody asked for); first-fit creates only the three and strands 2.
By hand: 7 slices per card, 1g = 1, 3g = 3 compute slices, so each side leaves 7 − (2 × 1 + 3)
= 2 slices serving no demand: as spare instances or as stranded slices, counted alike. Also:
the per-GPU before/after layout is in the plan, and the partial layout is a mig-parted entry.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gpuledger.core.config import Settings
from gpuledger.optimizer.mig.inputs import BusyInstance, Demand, Fleet, Gpu, ModelDemand, Node
from gpuledger.optimizer.mig.planner import MigOptions, plan_mig
from gpuledger.optimizer.plan.contract import MigChanges, Plan
from gpuledger.optimizer.plan.render import eviction_rows, render_plan

A100 = "A100-80GB"


ASKED = {"1g.10gb": 2, "3g.40gb": 1}


def two_card_plan(spare: bool) -> Plan:
    gpus = tuple(Gpu(node="n0", index=i, model=A100, config=None) for i in range(2))
    demand = Demand((ModelDemand(A100, ASKED, 0),))
    settings = Settings.model_validate({"plans": {"spare_instances": spare}})
    return plan_mig(Fleet((Node(name="n0", gpus=gpus),)), demand, MigOptions(time_limit_s=10), settings,
                    datetime(2026, 11, 5, tzinfo=UTC))


def test_only_demanded_instances_are_created_by_default():
    assert Settings().plans.spare_instances is False
    plan = two_card_plan(spare=False)
    assert isinstance(plan.changes, MigChanges)
    (node,) = plan.changes.nodes
    (gpu,) = node.gpus_changed
    assert dict(gpu.after.mig_devices) == ASKED
    assert plan.effect.spare_instances == 0 and plan.effect.spare_slices == 0
    assert plan.effect.slices_stranded_after == 7 - 5 and plan.effect.unmet_instances == 0
    entry = node.mig_parted_entry()  # what MIG Manager reads: exactly the three devices
    assert {"devices": [gpu.index], "mig-enabled": True, "mig-devices": ASKED} in entry


def test_spare_instances_and_stranded_slices_count_alike():
    plan = two_card_plan(spare=True)
    assert isinstance(plan.changes, MigChanges)
    (node,) = plan.changes.nodes
    (gpu,) = node.gpus_changed
    after = dict(gpu.after.mig_devices)
    spare = {p: n - ASKED.get(p, 0) for p, n in after.items()}
    assert sum(spare.values()) > 0  # filled: more than was asked for
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


def test_eviction_list_names_the_serving_pod():
    """A card running a chat Deployment's pod (3g) must become 7 × 1g to serve the demand on one
    card (GPUs used 1, not 2): the plan lists that pod for eviction, marked serving."""
    chat = BusyInstance("3g.40gb", "prod", "chat-7d9f-x", evictable=True, serving=True)
    gpus = (Gpu(node="n0", index=0, model=A100, config=(("3g.40gb", 2),), busy=(chat,)),
            Gpu(node="n0", index=1, model=A100, config=None))
    demand = Demand((ModelDemand(A100, {"1g.10gb": 7}, 0),))
    plan = plan_mig(Fleet((Node(name="n0", gpus=gpus),)), demand, MigOptions(time_limit_s=10), Settings(),
                    datetime(2026, 11, 5, tzinfo=UTC))
    assert isinstance(plan.changes, MigChanges)
    (node,) = plan.changes.nodes
    assert [(p.namespace, p.pod, p.gpu_index, p.serving) for p in node.pods_to_evict] == [
        ("prod", "chat-7d9f-x", 0, True)]
    assert plan.effect.pods_evicted == 1 and plan.effect.serving_pods_evicted == 1
    assert eviction_rows(plan) == [{"node": "n0", "gpu": 0, "pod": "prod/chat-7d9f-x", "profile": "3g.40gb",
                                    "serving": True, "evictable": True}]
    text = render_plan(plan)
    assert "prod/chat-7d9f-x (serving)" in text and "of them serving" in text
