"""Fair-sharing weights on the twin: its ClusterQueues carry them and Kueue with `fairSharing` splits a
cohort's lendable quota by them.

Case (simulated minutes), one cohort, one KWOK node of 3 GPUs, Kueue's fair sharing on:

    queue  nominal  weight   jobs
    l      3        -        l1: 3 GPUs, arrives 0, runs 3
    a      0        2        a1, a2, a3: 1 GPU each, arrive 1, run 5
    b      0        3        b1, b2, b3: 1 GPU each, arrive 1, run 5

a's and b's jobs wait while l1 holds the cohort's 3 GPUs; when it ends both queues borrow l's idle
quota. Kueue's rule (scheduler/fair_sharing_iterator.go, cache/scheduler/fair_sharing.go): of the
ClusterQueues' heads it admits first the one whose queue's share *after* admission is lowest,
share = GPUs above nominal x 1000 / the cohort's lendable GPUs / weight. Admitting lowest-share
first settles on the split of the 3 GPUs whose largest share is smallest (`_fair_split`, by
enumeration): a 1 (share 1000/3/2 = 167), b 2 (2000/3/3 = 222); a 2 / b 1 would put a at 333,
a 0 / b 3 b at 333. Oldest-first (no fair sharing) would have given a's jobs all three: they are
created first. The order inside the episode is not asserted: Kueue puts the two queues' waiting
jobs back in line one queue after the other when l1's quota frees (watched: b a b once, a b b
twice, all three admissions within 10 ms), and a queue's identical jobs, created within one
second, tie on their timestamps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.k8s_testenv.cluster import LocalCluster
from tools.twin.harness import Twin
from tools.twin.model_gap import compare
from tools.twin.replay import QueueSpec, Window, WorkloadSpec, replay, timed_stages
from tools.twin_build.versions import Layout

SECONDS_PER_MINUTE = 10.0
LENDABLE = 3
WEIGHTS = {"a": 2.0, "b": 3.0}


def _fair_split() -> dict[str, int]:
    """The split of the lendable GPUs among a and b whose largest weighted share is smallest."""
    splits = [{"a": n, "b": LENDABLE - n} for n in range(LENDABLE + 1)]
    return min(splits, key=lambda s: max(s[q] * 1000 / LENDABLE / WEIGHTS[q] for q in WEIGHTS))


def test_fair_split_by_hand() -> None:
    assert _fair_split() == {"a": 1, "b": 2}


@pytest.fixture
def fair_twin(twin_layout: Layout, k8s_cluster: LocalCluster, tmp_path: Path) -> Iterator[Twin]:
    with Twin(k8s_cluster, twin_layout, tmp_path / "twin", stages=timed_stages(twin_layout)) as twin:
        twin.start_job_controller()
        twin.start_kueue(fair_sharing=True)
        yield twin


def test_fair_sharing_weights_split_the_cohorts_lendable_quota(fair_twin: Twin, k8s_namespace: str) -> None:
    def name(q: str) -> str:
        return f"{q}-{k8s_namespace}"[:63]

    cohort = f"fs-{k8s_namespace}"[:63]
    window = Window(
        queues=(QueueSpec(name("l"), LENDABLE, cohort=cohort),
                *(QueueSpec(name(q), 0, cohort=cohort, weight=w) for q, w in WEIGHTS.items())),
        nodes=(LENDABLE,),
        workloads=(WorkloadSpec("l1", 0, 3, name("l"), 3),
                   *(WorkloadSpec(f"{q}{i}", 1, 1, name(q), 5) for q in WEIGHTS for i in (1, 2, 3))))
    result = replay(fair_twin, window, k8s_namespace, seconds_per_minute=SECONDS_PER_MINUTE)
    seen = [(e.what, e.job, round(result.minute(e), 2)) for e in result.events]
    print("watched:", seen)
    assert result.finished, f"not every Workload finished: {seen}"
    first = [job[0] for job in result.order("admitted")][:1 + LENDABLE]
    assert first[0] == "l", seen
    assert {q: first[1:].count(q) for q in WEIGHTS} == _fair_split(), seen
    assert result.jobs_with("preempted") == set(), seen
    # The model fed the twin's demand, by the same weights: a pends more than b, as on the twin.
    gap = compare(result, window)
    print("model vs twin:", gap)
    twin_a, twin_b = gap[name("a")]["twin_pending_gpu_min"], gap[name("b")]["twin_pending_gpu_min"]
    assert twin_a > twin_b
    assert gap[name("a")]["model_pending_gpu_min"] > gap[name("b")]["model_pending_gpu_min"]
