"""The Plans page reads for people (issue 32).

Cases:
- a MIG change's eviction cell names two pods and counts the rest ("61 pods: a, b +59 more");
- the quota plan's pending and idle-quota effects read in GPU-hours (the plan's GPU-minutes / 60,
  divided here), never "13,082,209.60 GPU-minutes".
"""

from __future__ import annotations

from types import SimpleNamespace

from gpuledger.dashboards.pages.plans import effect_frame, evicted_note


def test_eviction_cell_counts_the_rest() -> None:
    pods = [f"ns/pod-{i}" for i in range(61)]
    assert evicted_note(pods) == "61 pods: ns/pod-0, ns/pod-1 +59 more"
    assert evicted_note(["ns/a"]) == "1 pod: ns/a" and evicted_note([]) == ""


def test_quota_effects_in_gpu_hours() -> None:
    effect = SimpleNamespace(idle_quota_gpu_minutes_before=13_082_209.6, idle_quota_gpu_minutes_after=600.0,
                             pending_gpu_minutes_before=900.0, currency="USD")
    rows = dict(effect_frame(effect, "USD").iter_rows())
    assert rows["idle quota GPU-hours before (held out, no borrowing)"] == f"{13_082_209.6 / 60:,.1f}"
    assert rows["idle quota GPU-hours after (held out, no borrowing)"] == "10.0" and rows["pending GPU-hours before (held out, no borrowing)"] == "15.0"
    assert not any("minutes" in label for label in rows)
