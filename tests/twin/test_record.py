"""The replay's bookkeeping without a cluster: watched events -> per-queue figures, and bad windows.

Events are made by hand on a compressed clock of 2 wall seconds per simulated minute, t0 = 100 s;
every expected figure is worked out below from the timeline, independently of `summarize`.
"""

from __future__ import annotations

import pytest

from tools.twin.record import JobFacts, Seen, summarize
from tools.twin.replay import QueueSpec, Window, WorkloadSpec, job_manifest, priority_class
from tools.twin_build.builder import TwinBuildError

SPM, T0 = 2.0, 100.0


def _at(minute: float) -> float:
    return T0 + minute * SPM


def test_summary_of_a_timeline_with_a_preemption_and_a_never_admitted_job() -> None:
    # x (a, 2 GPUs) created 0, admitted 0, finished 8; y (a, 1 GPU) created 1, admitted 4, preempted 5,
    # readmitted 7; z (b, 3 GPUs) created 2, never admitted; the replay ends at 12.
    jobs = {"x": JobFacts("a", 2, _at(0)), "y": JobFacts("a", 1, _at(1)), "z": JobFacts("b", 3, _at(2))}
    events = [Seen("admitted", "x", _at(0)), Seen("pending", "y", _at(1)), Seen("admitted", "y", _at(4)),
              Seen("preempted", "y", _at(5)), Seen("admitted", "y", _at(7)), Seen("finished", "x", _at(8)),
              Seen("finished", "y", _at(9)), Seen("admitted", "other-namespace-job", _at(3))]
    out = summarize(events, jobs, {"a": 2, "b": 4}, t0=T0, end=_at(12), seconds_per_minute=SPM)
    a, b = out["a"], out["b"]
    assert a.pending_gpu_minutes == 1 * (4 - 1) + 1 * (7 - 5)  # y before its first admission and after preemption
    assert b.pending_gpu_minutes == 3 * (12 - 2)  # z: created to the end
    waits = sorted([0 - 0, 4 - 1])  # x, y: creation to first admission
    assert a.wait_p50_min == (waits[0] + waits[1]) / 2
    assert a.wait_p95_min == pytest.approx(waits[0] + 0.95 * (waits[1] - waits[0]))
    assert b.wait_p50_min is None and b.wait_p95_min is None
    assert (a.preemptions, a.admissions, b.admissions) == (1, 3, 0)
    # x alone: 2 <= 2; y on top: 3 > 2 (borrowing), twice (x still runs at y's readmission).
    assert a.borrowing_admissions == 2 and b.borrowing_admissions == 0


def test_windows_the_twin_cannot_replay_are_refused_in_one_line() -> None:
    queues = (QueueSpec("a", 2),)
    for workloads, message in (
        ((WorkloadSpec("w", 0, 1, "nope", 1),), "names unknown queue 'nope'"),
        ((WorkloadSpec("w", 0, 0, "a", 1),), "needs gpus > 0"),
        ((WorkloadSpec("w", 0, 1, "a", 1), WorkloadSpec("w", 1, 1, "a", 1)), "names must be unique"),
    ):
        with pytest.raises(TwinBuildError, match=message) as caught:
            Window(queues, (2,), workloads).check()
        assert "\n" not in str(caught.value)


def test_job_carries_queue_priority_and_run_time_on_the_compressed_clock() -> None:
    job = job_manifest(WorkloadSpec("j", 3, 2, "team-a", 4.5, priority=-5), seconds_per_minute=10)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-a",
                                         "kueue.x-k8s.io/priority-class": "twin-priority-m5"}
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {"pod-complete.stage.kwok.x-k8s.io/delay": "45000ms"}
    assert template["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert priority_class(100) == "twin-priority-100"
