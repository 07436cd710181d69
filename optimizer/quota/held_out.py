"""Fairness judged where it matters: on the backtest's held-out days, with a repair (decision 0171).

The fit holds every queue to the bound on its fitting history (`optimizer.quota.fit`), where a
queue that was quiet there never waits, whatever it is cut to. The promise is about days the
plan has not seen, and the rolling backtest replays exactly such days with the same procedure.
So the verdict judges fairness there:

1. Offenders: queues whose pending GPU-minutes, summed over the held-out windows, rise by more
   than `MARGIN` x `max_pending_rise_share` of their held-out demand against the reference
   quotas (the current ones, or `FitSpec.reference`), without or with borrowing (decision
   0204: the held-out days are a sample too, and the plan will meet other days; half the bound
   is what they must show for the whole bound to hold there, as in the fit).
2. Repair, from the held-out evidence: each GPU series of an offender gets a raised floor, the
   least quota at which its held-out pending without borrowing exceeds the reference's by at
   most `MARGIN` x the bound x its held-out demand, plus the burst allowance of its floor
   (`floor_burst_share` of it, at least one unit), never above its reference quota: the need
   is measured on a few windows of a queue whose bursts the fit has just been shown to
   misjudge. An offender whose floors that does not raise (it loses with borrowing only, or
   its floors were already there) is held at its reference quota. The plan and every origin
   are fitted again with the raised floors (`FitSpec.raised`) and the backtest re-run: the
   re-check.
3. At most `ROUNDS` repairs. A plan that still breaks the whole bound on the held-out days is
   refused (`unfair`), naming the queues, unless it narrows a standing breach
   (`optimizer.quota.verdict`).

What the re-check is and is not: it replays the same held-out days that sized the repair, so it
shows the repair is enough there and that no other queue pays for it; it is not a fresh test of
the raised floors on unseen days (the floors of decision 0170 are what guards those). With a
fixed held-out history (`QuotaOptions.replay_history`, the caller's own test) nothing is
repaired: repairing from the test itself would grade the plan on its own answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpuledger.core.errors import InputError
from gpuledger.optimizer.quota.backtest import (
    Backtest,
    Replays,
    Split,
    baseline_replays,
    combine,
    run_backtest,
)
from gpuledger.optimizer.quota.fit import MARGIN, FitResult, FitSpec, fit_quotas, old_quotas
from gpuledger.optimizer.quota.guarantees import Floor, QuotaKey, burst_allowance, rise_shares
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.replay import QuotaSet, ReplayResult, replay_many
from gpuledger.optimizer.quota.spec import GPU, Quota

ROUNDS = 3


@dataclass(frozen=True)
class Repair:
    """What the held-out check found and did."""

    found: dict[str, float] = field(default_factory=dict)
    """Offending queues before any repair → their worst held-out rise (share of demand)."""
    rounds: int = 0
    raised: dict[QuotaKey, Floor] = field(default_factory=dict)
    left: dict[str, float] = field(default_factory=dict)
    """Queues still offending after the last round → their worst held-out rise."""
    repairable: bool = True
    """False: the held-out history is the caller's own test (`replay_history`), never repaired."""


def fair_fit(inputs: QuotaInputs, spec: FitSpec, splits: Sequence[Split], reason: str = "", *,
             repair: bool = True, reuse_baseline: bool = True
             ) -> tuple[FitResult, Backtest, Repair, tuple[ReplayResult, ReplayResult] | None]:
    """Steps 1-3 of the module docstring: the plan's fit, its backtest, what was repaired, and the
    held-out replays under the fairness reference (None: the current quotas are the reference).
    The held-out windows under the current quotas are replayed once for every round
    (`baseline_replays`); `reuse_baseline=False` replays them again in each round's backtest, the
    reference path the tests hold it to (decision 0219)."""
    old = old_quotas(inputs)
    reference = _reference_replays(inputs, spec.reference, splits)
    baseline = baseline_replays(inputs, old, splits) if reuse_baseline else None
    found: dict[str, float] = {}
    current, last = spec, None
    bound = spec.rules.max_pending_rise_share
    for round_ in range(ROUNDS + 1):
        try:
            final, bt = _measure(inputs, old, current, splits, reason, baseline=baseline)
        except InputError:
            if last is None:
                raise
            break  # the raised floors no longer fit a pool's capacity: the last round stands
        offenders = _offenders(bt, reference, MARGIN * bound)
        found = offenders if round_ == 0 else found
        last = (final, bt, offenders, current, round_)
        if not offenders or not repair or round_ == ROUNDS:
            break
        current = replace(current, raised=_raise(current, bt, offenders, spec.reference or old,
                                                 MARGIN * bound))
    assert last is not None
    final, bt, offenders, used, rounds = last
    left = {name: share for name, share in offenders.items() if share > bound + 1e-9}
    state = Repair(found, rounds, dict(used.raised), left, repair)
    return final or fit_quotas(inputs, used), bt, state, reference


def _measure(inputs: QuotaInputs, old: QuotaSet, spec: FitSpec, splits: Sequence[Split], reason: str, *,
             baseline: Sequence[Replays] | None) -> tuple[FitResult | None, Backtest]:
    """The backtest of the fit under `spec`; with a split that trains on the whole inputs (a
    fixed held-out history) the plan's own fit is that split's, made once. `baseline`: the
    splits under the current quotas, the same in every round (None: replayed with the fit)."""
    final = fit_quotas(inputs, spec) if any(s.train is inputs for s in splits) else None

    def refit(train: QuotaInputs) -> QuotaSet:
        return final.new if final is not None and train is inputs else fit_quotas(train, spec).new

    return final, run_backtest(inputs, old, refit, splits, reason, baseline=baseline)


def _offenders(bt: Backtest, reference: tuple[ReplayResult, ReplayResult] | None, bound: float
               ) -> dict[str, float]:
    """Queues whose held-out rise over the reference breaks the bound, with their worst rise."""
    if bt.before is None or bt.after is None:
        return {}
    base_hard, base_borrowing = reference if reference is not None else (bt.before, bt.before_borrowing)
    pairs = [(base_hard, bt.after)]
    if base_borrowing is not None and bt.after_borrowing is not None:
        pairs.append((base_borrowing, bt.after_borrowing))
    worst: dict[str, float] = {}
    for before, after in pairs:
        for name, share in rise_shares(before, after).items():
            worst[name] = max(worst.get(name, share), share)
    return {name: share for name, share in sorted(worst.items()) if share > bound + 1e-9}


def _raise(spec: FitSpec, bt: Backtest, offenders: Mapping[str, float], reference: Mapping[QuotaKey, Quota],
           target: float) -> dict[QuotaKey, Floor]:
    """Step 2: the raised floors after this round (the earlier ones kept)."""
    raised = dict(spec.raised)
    for key, ref in sorted(reference.items()):
        queue, _, resource = key
        if queue not in offenders or resource != GPU:
            continue
        top = round(ref.nominal)
        measured = _need(np.concatenate([w.split.test.column(key) for w in bt.windows]), top, target)
        allowance = burst_allowance(measured, spec.rules)
        need = min(top, measured + allowance)
        given = min((w.fitted[key].nominal for w in bt.windows if key in w.fitted), default=0.0)
        before = raised.get(key)
        if need > given and (before is None or need > before.units):
            raised[key] = Floor(need, f"raised: its held-out days needed {measured} + {allowance} for "
                                      f"bursts (repair)" if need < top else
                                f"raised to its quota: its held-out days needed {measured} (repair)")
    for queue in offenders:
        mine = [k for k in reference if k[0] == queue and k[2] == GPU]
        if all(raised.get(k) == spec.raised.get(k) for k in mine):  # nothing raised: hold it
            for k in mine:
                top = round(reference[k].nominal)
                raised[k] = Floor(top, f"held at its quota {top}: it lost on held-out days (repair)")
    return raised


def _need(demand: np.ndarray, top: int, target: float) -> int:
    """The least whole quota n ≤ top with Σ max(0, d − n) − Σ max(0, d − top) ≤ target × Σ d."""
    if top <= 0 or demand.size == 0:
        return max(0, top)
    values = np.sort(demand)
    tail = np.concatenate([np.cumsum(values[::-1])[::-1], [0.0]])
    levels = np.arange(top + 1, dtype=float)
    above = values.size - np.searchsorted(values, levels, side="right")
    pending = tail[values.size - above] - levels * above
    allowed = pending[top] + target * float(values.sum())
    return int(np.flatnonzero(pending <= allowed + 1e-9)[0])


def _reference_replays(inputs: QuotaInputs, reference: Mapping[QuotaKey, Quota] | None,
                       splits: Sequence[Split]) -> tuple[ReplayResult, ReplayResult] | None:
    """The held-out windows replayed under the fairness reference (no borrowing, borrowing);
    None when the current quotas are the reference."""
    if reference is None or not splits:
        return None
    ref = dict(reference)
    return (combine([replay_many(inputs, [ref], borrowing=False, history=s.test)[0] for s in splits]),
            combine([replay_many(inputs, [ref], history=s.test)[0] for s in splits]))
