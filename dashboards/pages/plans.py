"""Plans (admins act, viewers look): proposed plans with their diff and expected effect,
approve / reject, a dry-run preview before apply, the live status of a rollout, the audit log.

The buttons are drawn disabled for non-admins, but that is only a courtesy: every action is
checked again on the server (`dashboards.actions.PlanActions`), and so is seeing this page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
from dash import dcc, html

from gpuledger.core.errors import InputError
from gpuledger.dashboards import figures
from gpuledger.dashboards.access import can_see_fleet
from gpuledger.dashboards.actions import PlanActions, Preview, Rollout
from gpuledger.dashboards.pages.common import PageContext, graph, money, number, refuse, section, table
from gpuledger.dashboards.pages.grid import grid
from gpuledger.dashboards.pages.plan_twin import twin_section
from gpuledger.optimizer.plan.render_twin import SideBySide, side_by_side


@dataclass(frozen=True)
class PlansView:
    currency: str
    can_act: bool
    plans: pl.DataFrame
    selected: str | None
    status: str | None
    kind: str | None
    created: str | None
    effect: pl.DataFrame
    diff: pl.DataFrame
    warnings: tuple[str, ...]
    solver: str
    preview: Preview | None
    rollout: Rollout | None
    plan_audit: pl.DataFrame
    audit: pl.DataFrame
    hrefs: dict[str, str]
    cluster: bool
    headline: str | None = None
    """The out-of-sample headline and verdict of a quota plan (`optimizer.plan.evaluation`)."""
    teams: pl.DataFrame | None = None
    measured: SideBySide | None = None
    """A quota plan's backtest beside its twin measurement (`optimizer.plan.render_twin`)."""


def _hours(key: str, value: float | None) -> float | None:
    from gpuledger.optimizer.plan.render import effect_value

    return None if value is None else effect_value(key, value)


def plans_frame(records: list[Any]) -> pl.DataFrame:
    rows = []
    for r in records:
        e = r.plan.effect
        rows.append({
            "plan_id": r.plan.id, "kind": r.plan.kind, "status": r.status,
            "created_at": r.plan.created_at, "gpus_freed": e.gpus_freed,
            "pending_before": _hours("pending_gpu_minutes_before", e.pending_gpu_minutes_before),
            "pending_after": _hours("pending_gpu_minutes_after", e.pending_gpu_minutes_after),
            "saving": e.monthly_cost_saving,  # None: not priced (not $0)
        })
    return pl.DataFrame(rows, schema={
        "plan_id": pl.String, "kind": pl.String, "status": pl.String,
        "created_at": pl.Datetime("us", "UTC"), "gpus_freed": pl.Int64, "pending_before": pl.Float64,
        "pending_after": pl.Float64, "saving": pl.Float64,
    })


SHOWN_PODS = 2
"""Pods named in a MIG change's eviction cell; the rest are counted (the cell stays narrow)."""


def evicted_note(pods: list[str]) -> str:
    """"3 pods: ns/a, ns/b +1 more" (issue 32: a 200-character cell of every pod name)."""
    if not pods:
        return ""
    more = f" +{len(pods) - SHOWN_PODS} more" if len(pods) > SHOWN_PODS else ""
    return f"{len(pods)} pod{'s' if len(pods) > 1 else ''}: {', '.join(pods[:SHOWN_PODS])}{more}"


def disruption(plan: Any) -> str | None:
    """Who a MIG plan disrupts, in one line: pods to evict per namespace, most first."""
    from collections import Counter

    from gpuledger.optimizer.plan.contract import MigChanges

    if not isinstance(plan.changes, MigChanges):
        return None
    per = Counter(pod.namespace for node in plan.changes.nodes for pod in node.pods_to_evict)
    if not per:
        return "evicts no pod"
    gpus = sum(len(node.gpus_changed) for node in plan.changes.nodes)
    parts = ", ".join(f"{ns} {n}" for ns, n in per.most_common())
    return f"evicts {sum(per.values())} pods in {len(per)} namespaces to change {gpus} GPUs: {parts}"


def diff_frame(plan: Any) -> pl.DataFrame:
    """The plan's changes as rows: per MIG GPU before → after, or per quota old → new."""
    from gpuledger.optimizer.plan.contract import MigChanges

    rows: list[dict[str, str]] = []
    if isinstance(plan.changes, MigChanges):
        for node in plan.changes.nodes:
            evict: dict[int, list[str]] = {}
            for pod in node.pods_to_evict:
                evict.setdefault(pod.gpu_index, []).append(f"{pod.namespace}/{pod.pod}")
            for gpu in node.gpus_changed:
                rows.append({
                    "object": f"{node.node} / GPU {gpu.index}", "what": f"mig.config → {node.mig_config}",
                    "before": gpu.before.label(), "after": gpu.after.label(),
                    "note": evicted_note(evict.get(gpu.index, [])),
                })
    else:
        for q in plan.changes.quotas:
            if not q.changed:
                continue
            rows.append({
                "object": f"{q.cluster_queue} ({q.flavor}, {q.resource})",
                "what": "nominal / borrowing / lending",
                "before": f"{_q(q.old_nominal)} / {_q(q.old_borrowing_limit)} / {_q(q.old_lending_limit)}",
                "after": f"{_q(q.new_nominal)} / {_q(q.new_borrowing_limit)} / {_q(q.new_lending_limit)}",
                "note": f"cohort {q.cohort}" if q.cohort else "",
            })
    return pl.DataFrame(rows, schema={c: pl.String for c in ("object", "what", "before", "after", "note")})


def evaluation_parts(plan: Any) -> tuple[str | None, pl.DataFrame | None]:
    """The headline a reviewer can check (with the verdict) and winners and losers per team."""
    e = plan.evaluation
    if e is None:
        return None, None
    verdict = "proposed" if e.verdict == "propose" else "proposes nothing"
    text = f"{e.headline} — {verdict}: {e.reason} (worst queue {e.max_rise_share:+.1%} of its demand, " \
           f"bound {e.rise_bound:.0%}; {e.method})"
    from gpuledger.optimizer.plan.render import team_rows

    columns = ("team", "gpus", "change", "floor", "pending", "share")
    return text, pl.DataFrame(team_rows(e, full_floor=True), schema={c: pl.String for c in columns})


def _q(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def effect_frame(effect: Any, currency: str) -> pl.DataFrame:
    """The plan's expected effect, labelled as `plans show` labels it (`EFFECT_LABELS`)."""
    from gpuledger.optimizer.plan.render import EFFECT_LABELS, effect_value

    rows = []
    for key, label in EFFECT_LABELS:
        value = getattr(effect, key, None)
        if value is None:
            continue
        value = effect_value(key, value)  # GPU-minutes read in GPU-hours (one rule with the CLI)
        text = money(value, effect.currency or currency) if key == "monthly_cost_saving" else (
            number(value))
        rows.append({"effect": label, "value": text})
    return pl.DataFrame(rows, schema={"effect": pl.String, "value": pl.String})


def view(ctx: PageContext, actions: PlanActions) -> PlansView:
    if not can_see_fleet(ctx.principal):
        refuse(ctx.principal, "plans (admins and viewers only)")
    bundle = ctx.data.plans_data(ctx.state.plan)
    records = bundle.records
    frame = plans_frame(records)
    ids = frame["plan_id"].to_list()
    selected = bundle.selected
    record = next((r for r in records if r.plan.id == selected), None)
    hrefs = {pid: ctx.state.with_(plan=pid).href("/plans") for pid in ids}
    headline, teams = evaluation_parts(record.plan) if record else (None, None)
    if record is not None and headline is None:
        headline = disruption(record.plan)
    return PlansView(
        currency=ctx.currency,
        can_act=ctx.principal.admin,
        plans=frame,
        selected=selected,
        status=record.status if record else None,
        kind=record.plan.kind if record else None,
        created=f"{record.plan.created_at:%Y-%m-%d %H:%M} UTC" if record else None,
        effect=effect_frame(record.plan.effect, ctx.currency) if record else pl.DataFrame(),
        diff=diff_frame(record.plan) if record else pl.DataFrame(),
        warnings=tuple(record.plan.warnings) if record else (),
        solver=(f"{record.plan.solver.solver} {record.plan.solver.status} in "
                f"{record.plan.solver.wall_s:.2f} s") if record else "",
        preview=actions.previewed(selected) if selected else None,
        rollout=actions.rollouts.get(selected) if selected else None,
        plan_audit=bundle.plan_audit,
        audit=bundle.audit,
        hrefs=hrefs,
        cluster=actions.cluster_factory is not None,
        headline=headline, teams=teams,
        measured=side_by_side(record.plan.evaluation, record.twin_effect)
        if record is not None and record.plan.kind == "quota" else None,
    )


def rollout_panel(rollout: Rollout | None) -> html.Div:
    """The live status of a rollout (refreshed by the page's interval while it runs)."""
    if rollout is None:
        return html.Div("no rollout started from this dashboard", className="muted", id="rollout-body")
    state = "running" if rollout.running else "finished"
    steps: list[Any] = []
    prog = (rollout.progress or {}).get("apply") if isinstance(rollout.progress, dict) else None
    if isinstance(prog, dict):
        for node in prog.get("nodes", []):
            steps.append(html.Li(f"Node/{node.get('node')}: {node.get('phase')}"
                                 + (f" ({node['detail']})" if node.get("detail") else "")))
        for step in prog.get("steps", []):
            steps.append(html.Li(f"ClusterQueue/{step.get('cluster_queue')} {step.get('phase')}: "
                                 f"{'done' if step.get('done') else 'to do'}"))
    events = [
        html.Li(f"{e['action']} {e.get('object') or ''} → {e['result']}"
                + (f": {e['detail']}" if e.get("detail") else ""))
        for e in rollout.events[-12:]
    ]
    return html.Div(
        [
            html.Div(f"Rollout by {rollout.user} {state}: status {rollout.status}"
                     + (f" — {rollout.message}" if rollout.message else ""), id="rollout-state"),
            html.Ul(steps, className="steps"),
            html.Details([html.Summary(f"{len(rollout.events)} audit events"), html.Ul(events)]),
        ],
        id="rollout-body",
    )


def _buttons(v: PlansView) -> html.Div:
    """Approve, reject, preview and apply, drawn disabled where the server would refuse."""
    note = "" if v.can_act else "Only admins can approve, reject or apply plans."
    apply_ready = v.can_act and v.preview is not None and v.status in ("approved", "applying", "failed")
    return html.Div(
        [
            html.Button("Approve", id="btn-approve", disabled=not v.can_act or v.status != "proposed",
                        className="button primary"),
            dcc.Input(id="reject-reason", placeholder="reason to reject", type="text", maxLength=500,
                      disabled=not v.can_act),
            html.Button("Reject", id="btn-reject", className="button",
                        disabled=not v.can_act or v.status not in ("proposed", "approved")),
            html.Button("Preview apply (dry run)", id="btn-preview", className="button",
                        disabled=not v.can_act or not v.cluster
                        or v.status not in ("proposed", "approved", "applying", "failed")),
            html.Button("Apply", id="btn-apply", className="button danger", disabled=not apply_ready),
            html.Span(note, className="muted", id="act-note"),
        ],
        className="actions",
    )


AUDIT_COLUMNS = [("seq", "#"), ("occurred_at", "when (UTC)"), ("actor", "who"), ("plan_id", "plan"),
                 ("action", "action"), ("object", "object"), ("result", "result"), ("detail", "detail")]


def _detail(v: PlansView) -> html.Section:
    """The selected plan: status, effect, changes, buttons, preview, rollout, its audit."""
    return section(
        f"Plan {v.selected}",
        html.Div([html.Span(v.status or "", className=f"badge status-{v.status}", id="plan-status"),
                  html.Span(f" {v.kind} plan, created {v.created}; solver {v.solver}")]),
        *[html.P(f"⚠ {w}", className="warning") for w in v.warnings],
        *([html.P(v.headline, id="plan-headline")] if v.headline else []),
        html.H4("Expected effect"),
        html.Div(table(v.effect, [("effect", ""), ("value", "")], id="effect-table"),
                 style={"maxWidth": "640px"}),  # a label beside its value, not across the page
        html.H4("Changes"),
        _data_grid(v.diff, [("object", "object"), ("what", "what"), ("before", "before"), ("after", "after"),
                            ("note", "pods to evict / note")], "diff-table", "no change", v.selected),
        *([html.H4("Per team (held-out days, no borrowing)"), _data_grid(
            v.teams, [("team", "team"), ("gpus", "GPUs (whole)"), ("change", "change"), ("floor", "floor"),
                      ("pending", "pending GPU-hours"), ("share", "of its demand")], "plan-teams-table",
            "no team", v.selected)] if v.teams is not None else []),
        *twin_section(v.measured),
        _buttons(v),
        html.Div(id="preview-out", children=_preview(v.preview)),
        html.H4("Rollout"),
        html.Div(rollout_panel(v.rollout), id="rollout-status"),
        html.H4("This plan's audit log"),
        table(v.plan_audit, AUDIT_COLUMNS, id="plan-audit-table"),
        id="plan-detail",
    )


def _data_grid(frame: pl.DataFrame, columns: list[tuple[str, str]], id: str, empty: str,
               plan: str | None) -> html.Div:
    """A plan's data table (its changes, its teams) in the grid people filter and sort
    (`pages.grid`, as the advice): a MIG plan changes hundreds of GPUs."""
    if frame.is_empty():
        return html.Div(empty, className="empty", id=id)
    return grid(frame, columns, id=id, file_name=f"{plan or 'plan'}-{id.removesuffix('-table')}.csv")


def savings_chart(plans: pl.DataFrame, currency: str) -> dcc.Graph | html.P:
    """The plans' savings as bars, or one line when no plan has a saving to draw (a single $0
    plan drew empty axes, issue 32); with no plans at all the chart says how to make one."""
    if not plans.is_empty() and not plans["saving"].fill_null(0.0).abs().sum():
        return html.P("no saving to chart: no plan here saves money a month (each plan's effect "
                      "is in its detail)", id="plans-chart-empty", className="empty")
    return graph(figures.plan_savings(plans, currency), "plans-chart")


def render(v: PlansView) -> html.Div:
    cur = v.currency
    plans_table = table(
        v.plans,
        [("plan_id", "plan"), ("kind", "kind"), ("status", "status"), ("created_at", "created (UTC)"),
         ("gpus_freed", "GPUs freed"), ("pending_before", "pending GPU-hours before"),
         ("pending_after", "after"), ("saving", f"monthly saving ({cur})")],
        id="plans-table", formats={"saving": lambda x: money(x, cur)},
        links={"plan_id": lambda row: v.hrefs[row["plan_id"]]},
    )
    children: list[Any] = [
        savings_chart(v.plans, cur), section("Plans", plans_table)
    ]
    if v.selected:
        children.append(_detail(v))
    children.append(section("Audit log (latest)", table(v.audit, AUDIT_COLUMNS, id="audit-table")))
    return html.Div(children, id="plans-page")


ROLLOUT_POLL_MS = 2000


def show(ctx: PageContext) -> html.Div:
    """The page for the registry (`dashboards.registry`), with the selected plan's id for the
    buttons and the rollout poll, which runs only while a rollout does."""
    if ctx.actions is None:
        raise InputError("the Plans page needs the app's plan actions")
    from gpuledger.dashboards.pages.advice_panels import plans_section

    v = view(ctx, ctx.actions)
    running = v.rollout is not None and v.rollout.running
    return html.Div([
        dcc.Store(id="plan-id", data=v.selected),
        dcc.Interval(id="rollout-tick", interval=ROLLOUT_POLL_MS, disabled=not running),
        render(v),
        plans_section(ctx),
    ])


def _preview(preview: Preview | None) -> Any:
    if preview is None:
        return html.Div("Apply is enabled after a dry-run preview of this plan.", className="muted")
    result = preview.result
    writes = [html.Li(f"{w['verb']} {w['object']}") for w in result.get("writes", [])[:40]]
    return html.Div(
        [
            html.Div(f"Dry run by {preview.user}: {result.get('message', '')}", id="preview-message"),
            html.Ul(writes),
        ],
        className="preview",
    )
