"""A recorded window replayed on the twin: the real Kueue admits in the order its documented semantics give.

Case (simulated minutes): ClusterQueues A and B, nominal 2 GPUs each, in one cohort (4 GPUs), on one
KWOK node of 4 GPUs; Kueue's defaults (BestEffortFIFO, preemption Never, no borrowing/lending limit).

    job  queue gpus arrives runs
    a1   A     1    0       7
    a2   A     2    1       4
    b1   B     2    2       4
    b2   B     1    3       5
    a3   A     2    6       2

The expected sequence is computed in `_expected()` by plain arithmetic from Kueue's documentation:
a workload is admitted when it arrives (or when quota frees) if its ClusterQueue's usage stays within
nominal, or, above nominal, the cohort still has unused quota to lend (total usage <= 4 GPUs); with
preemption Never nobody is evicted to make room; BestEffortFIFO lets a newer workload that fits pass
an older one that does not; among waiting workloads the older is admitted first. Event-by-event:
  0 a1 admitted (A 1/2)   1 a2 admitted, BORROWING (A 3/2, cohort 3/4)   2 b1 pending (cohort free 1 < 2)
  3 b2 admitted (B 1/2, cohort 4/4)   5 a2 done, b1 admitted, BORROWING (B 3/2)   6 a3 pending (free 0)
  7 a1 done (free 1 < 2)   8 b2 done, a3 admitted (A 2/2)   9 b1 done   10 a3 done.
So: admissions a1, a2, b2, b1, a3; pending b1 (2 GPUs x 3 min) and a3 (2 x 2); borrowing a2 and b1;
no preemption. The twin's minutes are wall-derived, so the test asserts the ORDER and the counts the
watch saw, and prints the measured minutes; every event is 1 simulated minute (10 s) from the next,
and the order above holds even when a hop is late by more than that (see `_expected`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.k8s_testenv.cluster import LocalCluster
from tools.twin.harness import GPU, Twin
from tools.twin.replay import QueueSpec, Window, WorkloadSpec, replay, timed_stages
from tools.twin_build.versions import Layout

SECONDS_PER_MINUTE = 10.0
NOMINAL = {"a": 2, "b": 2}
JOBS = (  # name, queue, gpus, arrival, run
    ("a1", "a", 1, 0, 7), ("a2", "a", 2, 1, 4), ("b1", "b", 2, 2, 4), ("b2", "b", 1, 3, 5), ("a3", "a", 2, 6, 2),
)


def _expected() -> tuple[list[str], set[str], set[str], dict[str, float]]:
    """Walk the case minute by minute with the rules of the module docstring (whole minutes suffice:
    arrivals and finishes never share a minute). Returns admission order, pending, borrowing, and
    pending GPU-minutes per queue."""
    capacity = sum(NOMINAL.values())
    jobs = {name: (q, gpus, arrive, run) for name, q, gpus, arrive, run in JOBS}
    running: dict[str, int] = {}  # job -> minute it ends
    waiting: list[str] = []  # in arrival order
    order, pending, borrowing = [], set(), set()
    pending_min = dict.fromkeys(NOMINAL, 0.0)
    for minute in range(0, 30):
        for name in [n for n, end in running.items() if end == minute]:
            del running[name]
        waiting += [n for n, (_, _, arrive, _) in jobs.items() if arrive == minute]
        for name in list(waiting):  # oldest first; a blocked one does not block the next
            q, gpus, arrive, run = jobs[name]
            used_q = sum(jobs[n][1] for n in running if jobs[n][0] == q)
            used_all = sum(jobs[n][1] for n in running)
            if used_all + gpus <= capacity:  # within nominal, or borrowing the cohort's unused quota
                waiting.remove(name)
                running[name] = minute + run
                order.append(name)
                if used_q + gpus > NOMINAL[q]:
                    borrowing.add(name)
                if minute > arrive:
                    pending.add(name)
                    pending_min[q] += gpus * (minute - arrive)
    assert not waiting and not running
    return order, pending, borrowing, pending_min


def test_expected_sequence_by_hand() -> None:
    order, pending, borrowing, pending_min = _expected()
    assert order == ["a1", "a2", "b2", "b1", "a3"]
    assert (pending, borrowing) == ({"b1", "a3"}, {"a2", "b1"})
    assert pending_min == {"a": 2 * (8 - 6), "b": 2 * (5 - 2)}


@pytest.fixture
def replay_twin(twin_layout: Layout, k8s_cluster: LocalCluster, tmp_path: Path) -> Iterator[Twin]:
    with Twin(k8s_cluster, twin_layout, tmp_path / "twin", stages=timed_stages(twin_layout)) as twin:
        twin.start_job_controller()
        twin.start_kueue()
        yield twin


def test_replayed_window_admits_in_kueues_documented_order(replay_twin: Twin, k8s_namespace: str) -> None:
    order, pending, borrowing, pending_min = _expected()
    window = Window(
        queues=tuple(QueueSpec(f"{q}-{k8s_namespace}"[:63], n, cohort=f"lab-{k8s_namespace}"[:63])
                     for q, n in NOMINAL.items()),
        nodes=(sum(NOMINAL.values()),),
        workloads=tuple(WorkloadSpec(name, arrive, gpus, f"{q}-{k8s_namespace}"[:63], run)
                        for name, q, gpus, arrive, run in JOBS))
    result = replay(replay_twin, window, k8s_namespace, seconds_per_minute=SECONDS_PER_MINUTE)
    seen = [(e.what, e.job, round(result.minute(e), 2)) for e in result.events]
    print("watched:", seen)
    print("per queue:", result.per_queue)
    assert result.finished, f"not every Workload finished: {seen}"
    assert result.order("admitted") == order, seen
    assert result.jobs_with("pending") == pending, seen
    assert result.jobs_with("preempted") == set(), seen
    assert result.jobs_with("bound") == result.jobs_with("succeeded") == {j[0] for j in JOBS}, seen
    assert all("insufficient unused quota" in e.detail for e in result.events if e.what == "pending"), seen
    by_queue = {q: result.per_queue[f"{q}-{k8s_namespace}"[:63]] for q in NOMINAL}
    borrowing_by_queue = {q: sum(1 for j in borrowing if j.startswith(q)) for q in NOMINAL}
    assert {q: o.borrowing_admissions for q, o in by_queue.items()} == borrowing_by_queue
    assert {q: o.admissions for q, o in by_queue.items()} == {"a": 3, "b": 2}
    # Pending GPU-minutes are wall-derived (control-loop latency adds to them): both queues waited.
    assert all(by_queue[q].pending_gpu_minutes > 0 for q in NOMINAL if pending_min[q] > 0)


RECLAIM_JOBS = (  # name, queue, gpus, arrival, run, priority
    ("a1", "a", 2, 0, 8, 100), ("a2", "a", 2, 1, 6, 0), ("b1", "b", 2, 2, 2, 0),
)


def _expected_reclaim() -> tuple[list[str], str]:
    """Kueue's `reclaimWithinCohort: Any` (its preemption docs): a pending workload that fits in its
    own ClusterQueue's nominal quota may evict workloads of other queues in the cohort that are
    borrowing, candidates taken lowest priority first, then most recently admitted first, until it
    fits. The evicted workload is requeued and readmitted when quota frees."""
    jobs = {name: (q, gpus, arrive, run, prio) for name, q, gpus, arrive, run, prio in RECLAIM_JOBS}
    # minute 0: a1 (A 2/2); minute 1: a2 borrows (A 4/2, cohort 4/4)
    assert jobs["a1"][1] <= NOMINAL["a"] and jobs["a1"][1] + jobs["a2"][1] > NOMINAL["a"]
    # minute 2: b1 asks 2 <= B's nominal 2 while the cohort is full: reclaim from A, which borrows
    assert jobs["b1"][1] <= NOMINAL["b"] and sum(g for _, g, *_ in jobs.values()) > sum(NOMINAL.values())
    victim = min(("a1", "a2"), key=lambda n: (jobs[n][4], -jobs[n][2]))  # lowest priority, newest
    assert jobs[victim][1] >= jobs["b1"][1]  # one eviction frees enough
    # b1 ends at 2 + 2 = 4, before a1 ends at 8: the victim comes back then, borrowing again
    assert jobs["b1"][2] + jobs["b1"][3] < jobs["a1"][2] + jobs["a1"][3]
    return ["a1", "a2", "b1", victim], victim


def test_reclaim_within_cohort_preempts_the_borrower(replay_twin: Twin, k8s_namespace: str) -> None:
    order, victim = _expected_reclaim()
    assert (order, victim) == (["a1", "a2", "b1", "a2"], "a2")
    queues = {q: f"{q}-{k8s_namespace}"[:63] for q in NOMINAL}
    window = Window(
        queues=tuple(QueueSpec(queues[q], n, cohort=f"lab-{k8s_namespace}"[:63], reclaim_within_cohort="Any")
                     for q, n in NOMINAL.items()),
        nodes=(sum(NOMINAL.values()),),
        workloads=tuple(WorkloadSpec(name, arrive, gpus, queues[q], run, priority=prio)
                        for name, q, gpus, arrive, run, prio in RECLAIM_JOBS))
    result = replay(replay_twin, window, k8s_namespace, seconds_per_minute=SECONDS_PER_MINUTE)
    seen = [(e.what, e.job, round(result.minute(e), 2)) for e in result.events]
    print("watched:", seen)
    print("per queue:", result.per_queue)
    assert result.finished, f"not every Workload finished: {seen}"
    assert result.order("admitted") == order, seen
    assert result.order("preempted") == [victim], seen
    assert result.order("finished") == ["b1", "a1", "a2"], seen  # 4 < 8 < readmission + 6
    assert (result.per_queue[queues["a"]].preemptions, result.per_queue[queues["b"]].preemptions) == (1, 0)
    assert result.per_queue[queues["a"]].borrowing_admissions == 2  # a2, both times


FLAVOR_CAPACITY = {"f1": 2, "f2": 2}  # listed in this order in the ClusterQueue; one node each
FLAVOR_JOBS = (  # name, gpus, arrival, run: one ClusterQueue, no cohort
    ("j1", 2, 0, 5), ("j2", 1, 1, 5), ("j3", 2, 2, 2), ("j4", 1, 3, 5),
)


def _expected_flavors() -> tuple[list[str], dict[str, str], set[str]]:
    """Kueue's flavor assignment with its default fungibility (whenCanBorrow MayStopSearch,
    whenCanPreempt TryNextFlavor; no cohort, preemption Never): a workload takes the FIRST flavor,
    in the ClusterQueue's order, whose unused quota holds it; none -> it waits (BestEffortFIFO: a
    later one that fits passes it). Returns admission order, flavor per job, the jobs that waited."""
    used = dict.fromkeys(FLAVOR_CAPACITY, 0)
    running: dict[str, tuple[str, int]] = {}  # job -> (flavor, end minute)
    waiting: list[str] = []
    order, flavor_of, waited = [], {}, set()
    jobs = {name: (gpus, arrive, run) for name, gpus, arrive, run in FLAVOR_JOBS}
    for minute in range(30):
        for name in [n for n, (_, end) in running.items() if end == minute]:
            used[running.pop(name)[0]] -= jobs[name][0]
        waiting += [n for n, (_, arrive, _) in jobs.items() if arrive == minute]
        for name in list(waiting):
            gpus, arrive, run = jobs[name]
            fits = [f for f in FLAVOR_CAPACITY if used[f] + gpus <= FLAVOR_CAPACITY[f]]
            if fits:
                waiting.remove(name)
                used[fits[0]] += gpus
                running[name] = (fits[0], minute + run)
                order.append(name)
                flavor_of[name] = fits[0]
                if minute > arrive:
                    waited.add(name)
    assert not waiting and not running
    return order, flavor_of, waited


def test_expected_flavor_assignment_by_hand() -> None:
    # j1 fills f1; j2 falls through to f2; j3 (2) fits neither and waits; j4 (1) takes f2's last
    # GPU; j1 ends at 5 and j3 gets f1.
    assert _expected_flavors() == (["j1", "j2", "j4", "j3"], {"j1": "f1", "j2": "f2", "j4": "f2", "j3": "f1"},
                                   {"j3"})


def test_two_flavors_admit_to_the_first_flavor_that_fits(replay_twin: Twin, k8s_namespace: str) -> None:
    from tools.twin.flavors import Flavor, FlavorQuota, node_names

    order, flavor_of, waited = _expected_flavors()
    names = {f: f"{f}-{k8s_namespace}"[:63] for f in FLAVOR_CAPACITY}
    flavors = tuple(Flavor(names[f], {"twin.gpuledger.io/flavor": names[f]}, ({GPU: n},))
                    for f, n in FLAVOR_CAPACITY.items())
    queue = f"q-{k8s_namespace}"[:63]
    window = Window(
        queues=(QueueSpec(queue, sum(FLAVOR_CAPACITY.values()),
                          quotas=tuple(FlavorQuota(names[f], GPU, n) for f, n in FLAVOR_CAPACITY.items())),),
        nodes=(), flavors=flavors,
        workloads=tuple(WorkloadSpec(name, arrive, gpus, queue, run) for name, gpus, arrive, run in FLAVOR_JOBS))
    result = replay(replay_twin, window, k8s_namespace, seconds_per_minute=SECONDS_PER_MINUTE)
    seen = [(e.what, e.job, round(result.minute(e), 2), e.detail[:40]) for e in result.events]
    print("watched:", seen)
    assert result.finished, f"not every Workload finished: {seen}"
    assert result.order("admitted") == order, seen
    assert result.jobs_with("pending") == waited, seen
    node_flavor = {node: flavor.name for node, flavor, _ in node_names(k8s_namespace, flavors)}
    bound = {e.job: node_flavor[e.detail] for e in result.events if e.what == "bound"}
    assert bound == {job: names[f] for job, f in flavor_of.items()}, seen
