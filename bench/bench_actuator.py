"""Benchmark: quota rollout ordering, ours (decreases first) vs the baseline (plan order).

For seeded random cohorts whose plans move GPUs between queues without changing the total
(old sum == new sum == capacity), replay both write orders and record how often, and by how
much, the cohort's nominal sum passes its capacity between two writes. Also times step planning
for a large plan. Pure computation: no cluster. Run: `python -m bench.bench_actuator`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from bench.common import timed, write_result
from gpuledger.actuator.quota_rollout import is_decrease, plan_steps
from gpuledger.optimizer.plan.contract import QuotaChange

PLANS = 2000
SEED = 7


def random_plan(rng: random.Random, queues: int, capacity: int) -> list[QuotaChange]:
    """A rebalancing plan: old and new quotas both sum to `capacity`; listed in random order."""

    def split() -> list[int]:
        cuts = sorted(rng.randint(0, capacity) for _ in range(queues - 1))
        return [b - a for a, b in zip([0, *cuts], [*cuts, capacity], strict=True)]

    old, new = split(), split()
    changes = [
        QuotaChange(cluster_queue=f"q{i}", cohort="c", flavor="h100", resource="nvidia.com/gpu",
                    old_nominal=o, new_nominal=n)
        for i, (o, n) in enumerate(zip(old, new, strict=True)) if o != n
    ]
    rng.shuffle(changes)
    return changes


def peak(changes: Sequence[QuotaChange], order: Sequence[Sequence[QuotaChange]]) -> float:
    """The largest cohort sum seen after any write when the writes happen in `order`."""
    current = {c.cluster_queue: c.old_nominal for c in changes}
    top = sum(current.values())
    for write in order:
        for change in write:
            current[change.cluster_queue] = change.new_nominal
        top = max(top, sum(current.values()))
    return top


def ours(changes: Sequence[QuotaChange]) -> list[list[QuotaChange]]:
    return [[c for c in changes if c.cluster_queue == s.cluster_queue
             and is_decrease(c) == (s.phase == "decrease")] for s in plan_steps(changes)]


def baseline(changes: Sequence[QuotaChange]) -> list[list[QuotaChange]]:
    return [[c] for c in changes]


def main() -> None:
    rng = random.Random(SEED)
    figures: dict[str, dict[str, float]] = {}
    results: dict[str, list[float]] = {"ours (decreases first)": [], "baseline (plan order)": []}
    for _ in range(PLANS):
        capacity = rng.choice([8, 16, 64, 256])
        changes = random_plan(rng, rng.randint(2, 12), capacity)
        if not changes:
            continue
        results["ours (decreases first)"].append(peak(changes, ours(changes)) - capacity)
        results["baseline (plan order)"].append(peak(changes, baseline(changes)) - capacity)
    for name, excess in results.items():
        over = [e for e in excess if e > 0]
        figures[name] = {
            "plans": len(excess),
            "plans_over_capacity": len(over),
            "share_over_capacity": round(len(over) / len(excess), 4),
            "max_excess_gpus": max(excess),
            "mean_excess_gpus_when_over": round(sum(over) / len(over), 2) if over else 0.0,
        }
    big = random_plan(random.Random(SEED), 2000, 20_000)
    steps, seconds = timed(lambda: plan_steps(big))
    write_result("actuator", {
        "what": "cohort nominal-quota sum above capacity during a quota rollout (GPUs)",
        "seed": SEED,
        "orders": figures,
        "plan_steps_2000_queue_plan": {
            "changes": len(big), "steps": len(steps), "seconds": round(seconds, 4)},
    })


if __name__ == "__main__":
    main()
