"""The held-out windows under the current quotas are replayed once per plan, not once per repair
round (issue 30, decision 0219), and the plan is the same as when they are replayed every round.

- `baseline_replays`: each window's pending GPU-minutes under the current quotas, without
  borrowing, equal Σ max(0, d − nominal) × step computed here with numpy on the window's demand;
- a plan that is repaired (a round or more, three origins) is the same made on the fast path
  (`plan_quota` as shipped) and on the reference path (`fair_fit(reuse_baseline=False)`, the
  current quotas replayed again in every round's backtest): the same quotas, verdict, repaired
  queues and rounds, and the same figures.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from gpuledger.core.config import Settings
from gpuledger.optimizer.plan.contract import Plan, QuotaChanges
from gpuledger.optimizer.quota import planner
from gpuledger.optimizer.quota.backtest import baseline_replays, rolling_splits
from gpuledger.optimizer.quota.fit import old_quotas
from gpuledger.optimizer.quota.held_out import fair_fit
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.planner import QuotaOptions, plan_quota
from gpuledger.optimizer.quota.spec import GPU
from gpuledger.optimizer.quota.synthetic import synthetic_quota_inputs

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def drifting() -> QuotaInputs:
    """Six teams on two flavors, hourly, 35 days, demand drifting: three origins, and the
    held-out check repairs team-05 in one round (seen when this test was written)."""
    return synthetic_quota_inputs(6, 2, flavors_per_team=2, days=35, step=timedelta(hours=1),
                                  start=datetime(2026, 9, 7, tzinfo=UTC), seed=1, drift=0.4)


def test_baseline_replays_are_the_current_quotas_replayed_by_hand() -> None:
    inputs = drifting()
    splits, reason = rolling_splits(inputs, timedelta(days=7), 3, timedelta(days=7))
    assert reason == "" and len(splits) == 3
    old = old_quotas(inputs)
    replays = baseline_replays(inputs, old, splits)
    assert len(replays) == len(splits)
    minutes = inputs.step / timedelta(minutes=1)
    for split, (hard, borrowing) in zip(splits, replays, strict=True):
        by_hand = sum(float(np.maximum(split.test.column(key) - quota.nominal, 0.0).sum())
                      for key, quota in old.items() if key[2] == GPU) * minutes
        assert by_hand > 0
        assert hard.pending_gpu_minutes == pytest.approx(by_hand)
        # borrowing only ever lets a queue run more: never more pending than hard quotas
        assert borrowing.pending_gpu_minutes <= hard.pending_gpu_minutes + 1e-6


def _quotas(plan: Plan) -> dict[tuple[str, str, str], float]:
    assert isinstance(plan.changes, QuotaChanges)
    return {(q.cluster_queue, q.flavor, q.resource): q.new_nominal for q in plan.changes.quotas}


def test_plan_with_the_baseline_replayed_once_equals_the_reference_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    inputs, settings, options = drifting(), Settings(), QuotaOptions(time_limit_s=20)
    fast = plan_quota(inputs, options, settings, NOW)
    monkeypatch.setattr(planner, "fair_fit", functools.partial(fair_fit, reuse_baseline=False))
    reference = plan_quota(inputs, options, settings, NOW)
    f, r = fast.evaluation, reference.evaluation
    assert f is not None and r is not None
    # the case exercises the reuse: several origins, at least one repair round
    assert len(f.origins) == 3 and f.repair_rounds >= 1 and f.repaired_queues
    assert _quotas(fast) == _quotas(reference) and _quotas(fast)
    assert (f.verdict, f.reason, f.repaired_queues, f.repair_rounds) == (
        r.verdict, r.reason, r.repaired_queues, r.repair_rounds)
    assert [t.floor_note for t in f.teams] == [t.floor_note for t in r.teams]
    for a, b in zip(f.origins, r.origins, strict=True):
        assert (a.start, a.end) == (b.start, b.end)
        assert a.model_dump(exclude={"start", "end"}) == pytest.approx(b.model_dump(exclude={"start", "end"}))
    assert (f.pending_before, f.pending_after, f.max_rise_share) == pytest.approx(
        (r.pending_before, r.pending_after, r.max_rise_share))
    assert fast.effect.model_dump() == pytest.approx(reference.effect.model_dump())
