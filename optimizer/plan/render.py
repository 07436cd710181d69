"""Plans as people read them: a diff table for the terminal, or the stable JSON.

The table shows what changes (each kind's own table, registered with the kind in
`contract.PLAN_KINDS`: per node each GPU's layout before → after and the pods to evict, per
ClusterQueue each quota old → new), the expected effect, the solver's status and the baselines
beside ours. The JSON is `Plan.to_json_dict()` plus the stored status.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from gpuledger.optimizer.plan.contract import PLAN_KINDS, Effect, MigChanges, Plan
from gpuledger.optimizer.plan.evaluation import Evaluation
from gpuledger.optimizer.plan.store import PlanRecord
from gpuledger.optimizer.plan.twin_effect import TwinEffect

EFFECT_LABELS: tuple[tuple[str, str], ...] = (
    ("gpus_used_before", "GPUs used before"),
    ("gpus_used_after", "GPUs used after"),
    ("gpus_freed", "GPUs freed"),
    ("slice_lower_bound", "slice lower bound (GPUs)"),
    ("gpus_changed", "GPUs changed"),
    ("pods_evicted", "pods evicted"),
    ("serving_pods_evicted", "of them serving (Deployments, StatefulSets)"),
    ("slices_stranded_before", "stranded slices before"),
    ("slices_stranded_after", "stranded slices after"),
    ("unmet_instances", "unmet instances"),
    ("unmet_slices", "unmet compute slices"),
    ("spare_instances", "instances nobody asked for"),
    ("spare_slices", "slices in instances nobody asked for"),
    ("pending_gpu_minutes_before", "pending GPU-hours before (held out, no borrowing)"),
    ("pending_gpu_minutes_after", "pending GPU-hours after (held out, no borrowing)"),
    ("idle_quota_gpu_minutes_before", "idle quota GPU-hours before (held out, no borrowing)"),
    ("idle_quota_gpu_minutes_after", "idle quota GPU-hours after (held out, no borrowing)"),
    ("monthly_cost_saving", "monthly cost saving"),
)
"""Each effect figure as people read it, in order: `plans show`, the Plans page and the
baselines table all use these labels (one copy)."""
_LABELS = dict(EFFECT_LABELS)


def effect_value(key: str, value: float) -> float:
    """An effect figure in the unit people read: the plan stores pending time and idle quota in
    GPU-minutes (`*_gpu_minutes_*`), every surface shows GPU-hours (issue 32: "13,082,209.60
    GPU-minutes"); other figures pass through. `plans show` and the Plans page both use it."""
    return value / 60 if "_gpu_minutes_" in key else value


def duration_text(span: timedelta) -> str:
    """`7d`, `36h`, `90m`: the way durations are written on the command line."""
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain left-aligned text table (numbers right-aligned)."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in header]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(header))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line(list(header)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def cell(value: Any) -> str:
    """One table cell: `-` for None, money-like floats with separators, the rest as text."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) >= 100 or value != int(value) else f"{value:g}"
    return str(value)


def render_effect(effect: Effect) -> str:
    rows: list[tuple[str, Any]] = []
    for key, label in EFFECT_LABELS:
        value = getattr(effect, key)
        if value is None:
            continue
        if key == "monthly_cost_saving":
            rows.append((label, f"{value:,.2f} {effect.currency or ''}".strip()))
        else:
            rows.append((label, effect_value(key, value)))
    return table(rows, ("effect", "value"))


def render_plan(plan: Plan, status: str | None = None, *, layout: TableLayout | None = None,
                twin: TwinEffect | None = None) -> str:
    """The readable diff of one plan; `layout` lays out its baselines table (`TableLayout`). A
    quota plan's backtest is followed by what measured it beside the twin's `twin` measurement
    (`render_twin`: "not measured on the twin" when None)."""
    from gpuledger.optimizer.plan.render_twin import render_side_by_side

    head = [
        f"plan {plan.id}  ({plan.kind}{', ' + status if status else ''})",
        f"created {plan.created_at.isoformat()}  fingerprint {plan.fingerprint}",
        f"solver {plan.solver.solver}: {plan.solver.status} in {plan.solver.wall_s:.2f}s "
        f"(limit {plan.solver.time_limit_s:g}s)",
    ]
    head.extend(fold(f"input {k}: {v}") for k, v in sorted(plan.inputs.items()))
    head.extend(fold(f"warning: {w}") for w in plan.warnings)
    parts = ["\n".join(head)]
    if plan.evaluation is not None:
        parts.append(render_evaluation(plan.evaluation))
    if plan.kind == "quota":
        parts.append(render_side_by_side(plan.evaluation, twin, table, fold))
    parts.append(PLAN_KINDS.get(plan.kind).render(plan.changes))
    parts.append(render_effect(plan.effect))
    if plan.baselines:
        parts.append(render_baselines(plan, layout))
    if plan.solver.stages:
        parts.append(table(
            [(s.name, s.status, s.objective, s.bound, round(s.wall_s, 3)) for s in plan.solver.stages],
            ("stage", "status", "objective", "bound", "seconds"),
        ))
    return "\n\n".join(parts)


def render_evaluation(e: Evaluation) -> str:
    """The headline a reviewer can check, the verdict, winners and losers, and each origin."""
    verdict = ("proposed: " if e.verdict == "propose" else "proposes nothing: ") + e.reason
    lines = [fold(line) for line in (
        f"expected effect ({e.method}):", f"  {e.headline}",
        f"  worst queue's pending rise: {e.max_rise_share:+.1%} of its demand (bound {e.rise_bound:.0%})",
        f"  {verdict}")]
    teams = table([tuple(row.values()) for row in team_rows(e)],
                  ("team", "GPUs", "change", "floor", "pending GPU-hours (held out, no borrowing)",
                   "of its demand"))
    parts = ["\n".join(lines), teams + floor_reasons(e)]
    if e.origins:
        parts.append(table(
            [(f"{o.start:%Y-%m-%d %H:%M}", f"{o.end:%Y-%m-%d %H:%M}", f"{o.fit_days:g}",
              f"{o.pending_before / 60:,.1f}", f"{o.pending_after / 60:,.1f}",
              "n/a" if o.reduction is None else f"{-o.reduction:+.1%}") for o in e.origins],
            ("held out from", "to", "fit days", "pending GPU-hours before (no borrowing)", "after", "change"),
        ))
    return "\n\n".join(parts)


FLOOR_WIDTH = 116
"""Where `fold` folds a line below a table (within 120 columns with its indent)."""


def fold(text: str) -> str:
    """One long line of a list below a table, folded within 120 columns (`FLOOR_WIDTH` plus its
    indent), never inside a word or a name."""
    return textwrap.fill(text, FLOOR_WIDTH, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)


def floor_reasons(e: Evaluation) -> str:
    """Each team's floor reasoning in full, folded below the team table (the table's floor column
    carries the GPUs only: one team's reasoning ran to hundreds of characters, issue 32)."""
    lines = [fold(f"{t.team}: {t.floor_note}")
             for t in sorted(e.teams, key=lambda t: (t.rise_share, t.team)) if t.floor_note]
    return "\n\nfloor (GPUs), why:\n" + "\n".join(lines) if lines else ""


def team_rows(e: Evaluation, *, full_floor: bool = False) -> list[dict[str, str]]:
    """Winners and losers per team as people read them (`plans show` and the Plans page): a
    team whose whole-GPU quota stays reads "unchanged", not "14 → 14 +0" (issue 32: every team
    read so while MIG quotas changed), as the diff leaves unchanged quotas out. The floor is
    its GPUs (the reasoning: `floor_reasons`), or with `full_floor` the reasoning itself (the
    Plans page's data grid)."""
    rows = []
    for t in sorted(e.teams, key=lambda t: (t.rise_share, t.team)):
        same = t.gpus_after == t.gpus_before
        rows.append({
            "team": t.team,
            "gpus": f"{t.gpus_before:g}" if same else f"{t.gpus_before:g} → {t.gpus_after:g}",
            "change": "unchanged" if same else f"{t.gpus_after - t.gpus_before:+g}",
            "floor": (t.floor_note if full_floor else "") or f"{t.floor_gpus:g}",
            "pending": f"{t.pending_before / 60:,.1f} → {t.pending_after / 60:,.1f}",
            "share": f"{t.rise_share:+.1%}" if t.demand > 0 else "no demand"})
    return rows


def eviction_rows(plan: Plan) -> list[dict[str, Any]]:
    """The pods a MIG plan evicts, one row each (node, GPU, pod, profile, serving, evictable):
    for a page's table (the Plans page can show it beside the layout diff) and for `--json`."""
    if not isinstance(plan.changes, MigChanges):
        return []
    return [
        {"node": node.node, "gpu": pod.gpu_index, "pod": f"{pod.namespace}/{pod.pod}",
         "profile": pod.profile or "whole GPU", "serving": pod.serving, "evictable": pod.evictable}
        for node in plan.changes.nodes for pod in node.pods_to_evict
    ]


TableLayout = Callable[[Sequence[Mapping[str, Any]], Sequence[str]], str]
"""Lays out rows (dicts) under the given columns: the CLI passes its terminal-fitted table
(`commands._output.render_table`, above this layer); without one, the plain `table` here."""


def baseline_label(key: str) -> str:
    """A baseline figure's header for people, its unit in it: the effect's label (GPU-minutes
    read as GPU-hours, `effect_value`) without the mode each row's method already names."""
    label = _LABELS.get(key) or key.replace("_gpu_minutes", " GPU-hours").replace("_", " ")
    return label.removesuffix(" (held out, no borrowing)")


def baseline_rows(plan: Plan) -> list[dict[str, Any]]:
    """The plan's own row and each baseline's, keyed by `baseline_label`, figures in the unit
    people read (`effect_value`: GPU-hours, never GPU-minutes beside them), in the effect's
    order. The JSON keeps the plan's keys and units."""
    found = {k for b in plan.baselines for k in b.figures}
    keys = [k for k, _ in EFFECT_LABELS if k in found] + sorted(found - set(_LABELS))
    ours = plan.effect.model_dump()

    def figures(get: Callable[[str], Any]) -> dict[str, Any]:
        return {baseline_label(k): None if get(k) is None else effect_value(k, get(k)) for k in keys}

    rows = [{"method": _our_name(plan), **figures(lambda k: _ours(ours, k))}]
    rows.extend({"method": b.name, **figures(b.figures.get)} for b in plan.baselines)
    return rows


def render_baselines(plan: Plan, layout: TableLayout | None = None) -> str:
    """The baselines beside the plan (`baseline_rows`), laid out by `layout` (or `table`), each
    baseline's note folded below (the table stays narrow)."""
    rows = baseline_rows(plan)
    columns = list(rows[0])
    text = layout(rows, columns) if layout else table([tuple(r.values()) for r in rows], columns)
    notes = [fold(f"{b.name}: {b.note}") for b in plan.baselines if b.note]
    return text + ("\n" + "\n".join(notes) if notes else "")


def _our_name(plan: Plan) -> str:
    """What the plan's own row measures: a quota plan's effect is its held-out replay under
    hard quotas (no borrowing), every other row names its own mode and days."""
    e = plan.evaluation
    if plan.kind == "quota" and e is not None and e.origins:
        return "this plan (held out, hard quotas: no borrowing)"
    return "this plan"


def _ours(effect: dict[str, Any], key: str) -> Any:
    return effect.get(key)


def render_list(records: Sequence[PlanRecord]) -> str:
    if not records:
        return "no plans stored"
    rows = [
        (
            r.plan.id, r.plan.kind, r.status, r.plan.created_at.strftime("%Y-%m-%d %H:%M"),
            _summary(r.plan),
        )
        for r in records
    ]
    return table(rows, ("id", "kind", "status", "created (UTC)", "summary"))


def _summary(plan: Plan) -> str:
    return PLAN_KINDS.get(plan.kind).summary(plan)


def plan_json(record_or_plan: PlanRecord | Plan) -> str:
    """JSON for one plan; a stored record adds `status`, `updated_at` and `progress`."""
    if isinstance(record_or_plan, PlanRecord):
        body = record_or_plan.plan.to_json_dict()
        body["status"] = record_or_plan.status
        body["updated_at"] = record_or_plan.updated_at.isoformat()
        body["progress"] = record_or_plan.progress
        twin = record_or_plan.twin_effect
        body["twin_effect"] = None if twin is None else twin.model_dump(mode="json")
    else:
        body = record_or_plan.to_json_dict()
    return json.dumps(body, indent=2)


def list_json(records: Sequence[PlanRecord]) -> str:
    return json.dumps(
        [
            {
                "id": r.plan.id, "kind": r.plan.kind, "status": r.status,
                "created_at": r.plan.created_at.isoformat(), "updated_at": r.updated_at.isoformat(),
                "fingerprint": r.plan.fingerprint, "summary": _summary(r.plan),
            }
            for r in records
        ],
        indent=2,
    )
