"""The model-vs-twin comparison without a cluster: a watched timeline made by hand, sampled, and
replayed through the product's quota model (whole workloads, decision 0249); each figure worked
out below independently.

Timeline: the case of test_replay.py with no latency (A, B nominal 2 each, one cohort of 4):
a1 (A, 1) runs 0-7; a2 (A, 2) runs 1-5; b1 (B, 2) arrives 2, admitted 5, ends 9; b2 (B, 1) runs
3-8; a3 (A, 2) arrives 6, admitted 8, ends 10.
"""

from __future__ import annotations

from dataclasses import replace

from tools.twin.harness import GPU
from tools.twin.model_gap import FLAVOR, compare, model_pending, sampled
from tools.twin.record import JobFacts, QueueOutcome, Seen
from tools.twin.replay import QueueSpec, ReplayResult, Window, WorkloadSpec

SPM, T0 = 2.0, 50.0
TIMELINE = {  # job: (queue, gpus, created, admitted, finished)
    "a1": ("A", 1, 0, 0, 7), "a2": ("A", 2, 1, 1, 5), "b1": ("B", 2, 2, 5, 9),
    "b2": ("B", 1, 3, 3, 8), "a3": ("A", 2, 6, 8, 10),
}
WINDOW = Window((QueueSpec("A", 2, cohort="lab"), QueueSpec("B", 2, cohort="lab")), (4,),
                tuple(WorkloadSpec(j, c, g, q, f - a) for j, (q, g, c, a, f) in TIMELINE.items()))


def _result() -> ReplayResult:
    events = sorted([Seen(what, j, T0 + at * SPM) for j, (_, _, _, a, f) in TIMELINE.items()
                     for what, at in (("admitted", a), ("finished", f))], key=lambda e: e.at)
    jobs = {j: JobFacts(q, g, T0 + c * SPM) for j, (q, g, c, _, _) in TIMELINE.items()}
    outcome = QueueOutcome(0.0, None, None, 0, 0, 0)
    return ReplayResult({"A": outcome, "B": outcome}, events, SPM, T0, True, jobs, T0 + 11 * SPM)


def test_sampled_demand_and_pending_at_mid_minute() -> None:
    demand, pending = sampled(_result(), WINDOW, 11)
    # pending: b1 at 2.5, 3.5, 4.5 (2 GPUs); a3 at 6.5, 7.5 (2 GPUs); all in the one flavor's GPUs
    assert pending == {(m, q, FLAVOR, GPU): 2 for m, q in ((2, "B"), (3, "B"), (4, "B"), (6, "A"), (7, "A"))}
    a = [sum(g for q, g, c, _, f in TIMELINE.values() if q == "A" and c <= m + 0.5 < f) for m in range(11)]
    assert [demand.get((m, "A", FLAVOR, GPU), 0) for m in range(11)] == a == [1, 3, 3, 3, 3, 1, 3, 2, 2, 2, 0]
    assert [demand.get((m, "B", FLAVOR, GPU), 0) for m in range(11)] == [0, 0, 2, 3, 3, 3, 3, 3, 2, 0, 0]


def test_mixed_sizes_let_the_model_run_part_of_a_larger_workload_so_it_pends_less() -> None:
    # Each queue's smallest workload is 1 GPU, so the model admits in units of 1 and can run 1 GPU
    # of a 2-GPU workload (the demand it is fed does not say which workloads wait: decision 0249).
    # The model, minute by minute (cohort of 4; running work keeps running while demanded; then each
    # queue's own nominal while the cohort has room; then borrowing of the other's unused quota):
    # m2: A runs 3 (borrowing 1), B asks 2, 1 free -> B runs 1, pends 1
    # m3, m4: B asks 3, keeps 1, cohort full -> pends 2 each
    # m5: A asks 1 -> B runs 3 (2 own + 1 borrowed), pends 0
    # m6: A asks 3, keeps 1, cohort full (1 + 3) -> pends 2
    # m7: A asks 2, keeps 1, cohort full -> pends 1;  m8: B asks 2 -> A runs 2, pends 0
    demand, _ = sampled(_result(), WINDOW, 11)
    assert model_pending(WINDOW, demand, 11) == {"A": 2 + 1, "B": 1 + 2 + 2}
    gap = compare(_result(), WINDOW)
    assert gap["A"]["twin_pending_gpu_min"] == 2 * 2 and gap["B"]["twin_pending_gpu_min"] == 2 * 3
    assert gap["A"]["gap_pct"] == round(100 * (3 - 4) / 4, 1)
    assert gap["B"]["gap_pct"] == round(100 * (5 - 6) / 6, 1)


MIG = "nvidia.com/mig-1g.10gb"
FLAVORED = {  # job: (resource, amount, flavor, created, admitted, finished); queue A, no cohort
    "x": (GPU, 2, "f1", 0, 0, 4), "y": (GPU, 2, "f1", 1, 4, 6),
    "m1": (MIG, 2, "g", 0, 0, 5), "m2": (MIG, 2, "g", 1, 5, 7),
}


def test_flavors_and_mig_profiles_are_compared_apart() -> None:
    # Queue A: f1 2 GPUs, f2 2 GPUs, g 3 MIG slices. Pinned to f1, y waits for x although f2 is
    # free (the record put it on f1); m2 waits for m1 on g.
    # Twin (sampled at m + 0.5): y pends at 1.5, 2.5, 3.5 -> 2 x 3 = 6; m2 at 1.5 .. 4.5 -> 2 x 4 = 8.
    # Model (per flavor and resource): f1 asks 4 of 2 at minutes 1-3 -> 2 x 3 = 6; g asks 4 of 3 at
    # minutes 1-4, in workloads of 2 slices (its smallest) -> runs 2, 2 x 4 = 8. Fluid it ran 3 and
    # pended 1 x 4 = 4, a fraction of m2 running (the -50 % of decision 0235).
    from tools.twin.flavors import Flavor, FlavorQuota

    window = Window(
        (QueueSpec("A", 4, quotas=(FlavorQuota("f1", GPU, 2), FlavorQuota("f2", GPU, 2), FlavorQuota("g", MIG, 3))),),
        (), tuple(WorkloadSpec(j, c, n, "A", f - a, resource=r, flavor=fl) for j, (r, n, fl, c, a, f) in FLAVORED.items()),
        (Flavor("f1", {}, ({GPU: 2},)), Flavor("f2", {}, ({GPU: 2},)), Flavor("g", {}, ({MIG: 3},))))
    window.check()
    events = sorted([Seen(what, j, T0 + at * SPM) for j, (_, _, _, _, a, f) in FLAVORED.items()
                     for what, at in (("admitted", a), ("finished", f))], key=lambda e: e.at)
    jobs = {j: JobFacts("A", n, T0 + c * SPM) for j, (_, n, _, c, _, _) in FLAVORED.items()}
    result = ReplayResult({"A": QueueOutcome(0.0, None, None, 0, 0, 0)}, events, SPM, T0, True, jobs, T0 + 8 * SPM)
    demand, pending = sampled(result, window, 8)
    assert {k[2:] for k in demand} == {("f1", GPU), ("g", MIG)}
    assert sum(v for k, v in pending.items() if k[3] == GPU) == 6 and sum(v for k, v in pending.items() if k[3] == MIG) == 8
    gap = compare(result, window)
    assert set(gap) == {"A", f"A {MIG}"}
    assert (gap["A"]["twin_pending_gpu_min"], gap["A"]["model_pending_gpu_min"], gap["A"]["gap_pct"]) == (6, 6.0, 0.0)
    row = gap[f"A {MIG}"]
    assert (row["twin_pending_gpu_min"], row["model_pending_gpu_min"], row["gap_pct"]) == (8, 8.0, 0.0)
    fluid = replace(window, workloads=tuple(replace(w, gpus=1) if w.name == "m1" else w for w in window.workloads))
    assert model_pending(fluid, demand, 8, MIG) == {"A": 4.0}  # a 1-slice workload: units of 1


WHOLE = {  # job: (queue, gpus, created, admitted, finished): B's workloads all 2 GPUs
    "a1": ("A", 1, 0, 0, 7), "a2": ("A", 2, 1, 1, 5), "b1": ("B", 2, 2, 5, 9), "b2": ("B", 2, 3, 7, 10),
}


def test_whole_workloads_wait_whole_in_the_model_as_in_kueue() -> None:
    # A, B nominal 2, one cohort of 4, no preemption. Kueue: a1 at 0; a2 at 1 (A borrows 1);
    # b1 (2) arrives at 2 with 1 free and waits; b2 (2) at 3 waits; a2 ends at 5: b1 takes B's
    # nominal, b2 would need 2 of the 1 left; a1 ends at 7: b2 runs. Sampled: b1 pends at 2.5-4.5
    # (2 x 3), b2 at 3.5-6.5 (2 x 4): B 14, A 0.
    # The model, B in units of 2: m2 B asks 2, 1 free -> 0 runs, pends 2; m3, m4 pends 4; m5 A
    # asks 1, B takes its own 2 and cannot borrow a whole 2 of the 1 left -> pends 2; m6 the
    # same; m7 B runs 4. 2 + 4 + 4 + 2 + 2 = 14. Fluid (or in units of 1): m2 B runs 1 of b1,
    # m5, m6 B runs 3: 1 + 3 + 3 + 1 + 1 = 9 (-36 %).
    window = Window((QueueSpec("A", 2, cohort="lab"), QueueSpec("B", 2, cohort="lab")), (4,),
                    tuple(WorkloadSpec(j, c, g, q, f - a) for j, (q, g, c, a, f) in WHOLE.items()))
    events = sorted([Seen(what, j, T0 + at * SPM) for j, (_, _, _, a, f) in WHOLE.items()
                     for what, at in (("admitted", a), ("finished", f))], key=lambda e: e.at)
    jobs = {j: JobFacts(q, g, T0 + c * SPM) for j, (q, g, c, _, _) in WHOLE.items()}
    outcome = QueueOutcome(0.0, None, None, 0, 0, 0)
    result = ReplayResult({"A": outcome, "B": outcome}, events, SPM, T0, True, jobs, T0 + 11 * SPM)
    gap = compare(result, window)
    assert (gap["B"]["twin_pending_gpu_min"], gap["B"]["model_pending_gpu_min"], gap["B"]["gap_pct"]) == (14, 14.0, 0.0)
    assert (gap["A"]["twin_pending_gpu_min"], gap["A"]["model_pending_gpu_min"]) == (0, 0.0)
    assert gap["B"]["model_fluid_pending_gpu_min"] == 9.0
    demand, _ = sampled(result, window, 11)
    ones = replace(window, workloads=(*window.workloads, WorkloadSpec("b0", 20, 1, "B", 1)))
    assert model_pending(ones, demand, 11) == {"A": 0.0, "B": 9.0}  # B's smallest is now 1 GPU


RECLAIM = {  # the reclaim window of bench/bench_twin_model_gap.py as the twin watched it (no latency)
    "a1": ("A", 2, 0, ((("admitted", 0), ("finished", 8)))),
    "a2": ("A", 2, 1, (("admitted", 1), ("preempted", 2), ("admitted", 4), ("finished", 10))),
    "b1": ("B", 2, 2, (("admitted", 2), ("finished", 4))),
}


def _reclaim_result() -> ReplayResult:
    events = sorted([Seen(what, j, T0 + at * SPM) for j, (_, _, _, seen) in RECLAIM.items() for what, at in seen],
                    key=lambda e: e.at)
    jobs = {j: JobFacts(q, g, T0 + c * SPM) for j, (q, g, c, _) in RECLAIM.items()}
    outcome = QueueOutcome(0.0, None, None, 0, 0, 0)
    return ReplayResult({"A": outcome, "B": outcome}, events, SPM, T0, True, jobs, T0 + 11 * SPM)


def test_a_reclaiming_queue_takes_its_nominal_back_from_the_borrower_as_kueue_does() -> None:
    # A and B: nominal 2 each, one cohort of 4, `reclaimWithinCohort: Any`. A runs a1 and a2 (4,
    # borrowing B's 2) from minute 1; b1 arrives at 2 within B's nominal: Kueue preempts a2, b1
    # runs 2-4, a2 waits 2-4 (2 GPUs x 2 minutes = 4) and runs again from 4. No one else waits.
    # The model fed that demand: at minutes 2 and 3 B wants 2 of its nominal, nothing is free, A
    # borrows 2 -> B takes them back; A pends 2 + 2 = 4, B 0. Without reclaim (the policy Never)
    # A keeps running and B pends the same 4: the gap decision 0235 measured (-100 % and +4).
    window = Window(tuple(QueueSpec(q, 2, cohort="lab", reclaim_within_cohort="Any") for q in "AB"), (4,),
                    tuple(WorkloadSpec(j, c, g, q, 1) for j, (q, g, c, _) in RECLAIM.items()))
    result = _reclaim_result()
    demand, pending = sampled(result, window, 11)
    assert sum(pending.values()) == 4 and {k[1] for k in pending} == {"A"}
    gap = compare(result, window)
    assert (gap["A"]["twin_pending_gpu_min"], gap["A"]["model_pending_gpu_min"], gap["A"]["gap_pct"]) == (4, 4.0, 0.0)
    assert (gap["B"]["twin_pending_gpu_min"], gap["B"]["model_pending_gpu_min"]) == (0, 0.0)
    never = Window(tuple(QueueSpec(q, 2, cohort="lab") for q in "AB"), (4,), window.workloads)
    assert model_pending(never, demand, 11) == {"A": 0.0, "B": 4.0}


def test_the_model_starts_from_what_the_twin_ran_at_its_first_sample() -> None:
    # A, B nominal 2 in a cohort of 4. a1, a2 (A, 2 GPUs each) are created first and admitted at 0,
    # A borrowing B's idle 2; b1 (B, 2) is created at 0 after them and waits until they end at 5.
    # The twin: B pends 2 GPUs for minutes 0-4 = 10, A none. The model fed only demand starts from
    # nothing running and gives each queue its own nominal first: A runs 2 and pends 2 for 5
    # minutes (10), B none, the other way round. Fed what ran at the first sample, as production
    # reads queue_samples.usage (decision 0251), A keeps its 4 (no preemption) and B waits: 0 / 10.
    timeline = {"a1": ("A", 2, 0, 0, 5), "a2": ("A", 2, 0, 0, 5), "b1": ("B", 2, 0, 5, 8)}
    window = replace(WINDOW, workloads=tuple(WorkloadSpec(j, c, g, q, f - a)
                                             for j, (q, g, c, a, f) in timeline.items()))
    events = sorted([Seen(what, j, T0 + at * SPM) for j, (_, _, _, a, f) in timeline.items()
                     for what, at in (("admitted", a), ("finished", f))], key=lambda e: e.at)
    jobs = {j: JobFacts(q, g, T0 + c * SPM) for j, (q, g, c, _, _) in timeline.items()}
    outcome = QueueOutcome(0.0, None, None, 0, 0, 0)
    result = ReplayResult({"A": outcome, "B": outcome}, events, SPM, T0, True, jobs, T0 + 8 * SPM)
    demand, pending = sampled(result, window, 8)
    assert model_pending(window, demand, 8) == {"A": 10.0, "B": 0.0}
    assert model_pending(window, demand, 8, pending=pending) == {"A": 0.0, "B": 10.0}
    gap = compare(result, window)
    assert (gap["B"]["twin_pending_gpu_min"], gap["B"]["model_pending_gpu_min"], gap["B"]["gap_pct"]) == (10, 10.0, 0.0)
