"""The Plans page reads for people (issue 32).

Cases:
- a MIG change's eviction cell names two pods and counts the rest ("61 pods: a, b +59 more");
- the quota plan's pending and idle-quota effects read in GPU-hours (the plan's GPU-minutes / 60,
  divided here), never "13,082,209.60 GPU-minutes"; so does the plans table's pending time;
- plans with no saving (one $0 plan, an unpriced one) get one line "no saving to chart", not
  empty axes; an unpriced saving stays None, never $0.
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


def test_savings_chart_only_with_a_saving_to_chart() -> None:
    """A single plan of $0 (or of no priced saving) draws no empty axes: one line says so; a
    plan with a saving gets the chart. The plans table's pending time reads in GPU-hours."""
    from datetime import UTC, datetime

    from dash import dcc, html

    from gpuledger.dashboards.pages.plans import plans_frame, savings_chart
    from gpuledger.optimizer.plan.contract import Effect

    def record(pid: str, saving: float | None) -> SimpleNamespace:
        plan = SimpleNamespace(id=pid, kind="quota", created_at=datetime(2026, 11, 5, tzinfo=UTC),
                               effect=Effect(monthly_cost_saving=saving, currency="USD"))
        return SimpleNamespace(plan=plan, status="proposed")

    for savings in ([0.0], [None], [0.0, None]):
        frame = plans_frame([record(f"p{i}", s) for i, s in enumerate(savings)])
        shown = savings_chart(frame, "USD")
        assert isinstance(shown, html.P) and shown.id == "plans-chart-empty"
        assert str(shown.children).startswith("no saving to chart")
    quota = record("q", None)
    quota.plan.effect = Effect(pending_gpu_minutes_before=900.0, pending_gpu_minutes_after=300.0)
    assert plans_frame([quota]).select("pending_before", "pending_after").row(0) == (15.0, 5.0)  # GPU-hours
    frame = plans_frame([record("p0", 0.0), record("p1", 1387.0)])
    assert frame["saving"].to_list() == [0.0, 1387.0]
    assert plans_frame([record("p0", None)])["saving"].to_list() == [None]  # unknown is not $0
    chart = savings_chart(frame, "USD")
    assert not isinstance(chart, html.P)
    assert any(isinstance(c, dcc.Graph) for c in _walk(chart))


def _walk(node: object) -> list[object]:
    children = getattr(node, "children", None)
    items = children if isinstance(children, list) else [children] if children is not None else []
    return [node, *(x for c in items for x in _walk(c))]
