"""A quota plan's model backtest and its twin measurement side by side, each labelled by what
measured it: one home for `plans show` (`render_side_by_side`) and the Plans page (`side_by_side`).

Why three columns, not two: the backtest covers the held-out days, the twin a recorded window of
minutes, so their figures are not comparable as they stand. The twin's record therefore carries
the product's model fed the same window's demand (`TwinTeam.model_*`): model-on-the-window beside
twin-on-the-window is the comparison; the backtest column is what the plan's headline says.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gpuledger.optimizer.plan.evaluation import Evaluation
from gpuledger.optimizer.plan.twin_effect import WHOLE_GPU, TwinEffect, TwinTeam

NOT_MEASURED = "not measured on the twin"
UNMEASURED_CELL = "–"
"""A figure one side did not measure: the product's mark for an unknown value, never 0."""
MODEL_BACKTEST = "model backtest"
TOTAL_ROW = "all teams (whole GPUs)"

SIDE_BY_SIDE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("team", "team"),
    ("backtest", "model backtest (held out)"),
    ("model_window", "model on the twin's window"),
    ("twin", "twin"),
)
"""The row keys of `side_by_side_rows` and their headers (the CLI table and the page table)."""
UNITS = "pending GPU-hours before → after under the plan (MIG profiles: instance-hours)"
"""What every cell of the side-by-side table holds."""


class SideBySide(BaseModel):
    """What measured the plan (`labels`, in column order) and the rows; `rows` is empty when the
    twin has not measured it."""

    labels: tuple[str, ...]
    rows: tuple[dict[str, str], ...]
    left_out: str = ""
    """What the rows leave out (quiet MIG profiles), or ""."""


def backtest_label(e: Evaluation | None) -> str:
    """'model backtest: 7 held-out days, hard quotas (no borrowing)'."""
    if e is None or not e.origins:
        return f"{MODEL_BACKTEST}: not tested out of sample"
    return f"{MODEL_BACKTEST}: {e.held_out_days:g} held-out days, hard quotas (no borrowing), {e.method}"


def twin_label(t: TwinEffect | None) -> str:
    """'twin: kube-scheduler + Kueue v0.17.0 on KWOK, window 2026-11-21 04:00–04:30 UTC, ...'."""
    if t is None:
        return f"twin: {NOT_MEASURED}"
    end = f"{t.window_end:%H:%M}" if t.window_end.date() == t.window_start.date() else \
        f"{t.window_end:%Y-%m-%d %H:%M}"
    cohorts = "cohorts as stored (borrowing)" if t.borrowing else "cohorts removed (no borrowing)"
    unfinished = [run for run, done in zip(("before", "after"), t.finished, strict=True) if not done]
    cut = f"; stopped at the window's end with work left ({', '.join(unfinished)})" if unfinished else ""
    return (f"twin: {t.measured_by}, window {t.window_start:%Y-%m-%d %H:%M}–{end} UTC, {cohorts}, "
            f"{t.workloads} workloads ({t.skipped} skipped), {t.seconds_per_minute:g} s per simulated "
            f"minute{cut}; measured {t.measured_at:%Y-%m-%d %H:%M} UTC")


def _change(before: float, after: float, digits: int) -> str:
    """'1.5 → 0.8 (−46.7%)' in hours of the resource, the change left out when before is 0."""
    cut = f" ({after / before - 1:+.1%})" if before else ""
    return f"{before / 60:,.{digits}f} → {after / 60:,.{digits}f}{cut}"


def _unit(resource: str) -> str:
    return "" if resource == WHOLE_GPU else f" {resource.removeprefix('nvidia.com/')}"


def side_by_side_rows(e: Evaluation | None, t: TwinEffect) -> list[dict[str, str]]:
    """One row per team and resource the backtest or the twin measured, then the whole-GPU total;
    a figure one side did not measure is `UNMEASURED_CELL`. A MIG profile's row where nothing
    pended, before or after, on the twin or in the model is left out (`quiet_profiles` counts
    them): the demo's window listed 34 such rows of "0.00 → 0.00"."""
    backtest = {team.team: team for team in (e.teams if e is not None else ())}
    twin = {(team.team, team.resource): team for team in t.teams}
    keys = sorted({(name, WHOLE_GPU) for name in backtest} | set(twin), key=lambda k: (k[1] != WHOLE_GPU, k))
    rows = []
    for name, resource in keys:
        b = backtest.get(name) if resource == WHOLE_GPU else None
        w = twin.get((name, resource))
        if b is None and w is not None and _quiet(w):
            continue
        rows.append({
            "team": name + _unit(resource),
            "backtest": UNMEASURED_CELL if b is None else _change(b.pending_before, b.pending_after, 1),
            "model_window": UNMEASURED_CELL if w is None else _change(w.model_before, w.model_after, 2),
            "twin": UNMEASURED_CELL if w is None else _change(w.twin_before, w.twin_after, 2)})
    rows.append({
        "team": TOTAL_ROW,
        "backtest": (UNMEASURED_CELL if e is None or not e.origins
                     else _change(e.pending_before, e.pending_after, 1)),
        "model_window": _change(t.total("model_before"), t.total("model_after"), 2),
        "twin": _change(t.total("twin_before"), t.total("twin_after"), 2)})
    return rows


def _quiet(w: TwinTeam) -> bool:
    return w.resource != WHOLE_GPU and not (w.twin_before or w.twin_after or w.model_before or w.model_after)


def quiet_profiles(t: TwinEffect | None) -> int:
    """MIG profile rows `side_by_side_rows` leaves out (nothing pending on either side)."""
    return sum(1 for w in t.teams if _quiet(w)) if t is not None else 0


def side_by_side(e: Evaluation | None, t: TwinEffect | None) -> SideBySide:
    """The labels and rows both surfaces show (module docstring)."""
    labels = (backtest_label(e), twin_label(t))
    quiet = quiet_profiles(t)
    left_out = f"not listed: {quiet} team MIG profile(s), nothing pending on the twin or in the model" \
        if quiet else ""
    return SideBySide(labels=labels, rows=tuple(side_by_side_rows(e, t)) if t is not None else (),
                      left_out=left_out)


def render_side_by_side(e: Evaluation | None, t: TwinEffect | None, table: Any, fold: Any) -> str:
    """The `plans show` section: 'measured by' with both labels (each folded by `fold`), then the
    table (`table(rows, header)`: render's plain table), or the twin's 'not measured' line alone."""
    view = side_by_side(e, t)
    head = "\n".join(["measured by:", *(fold(f"  {label}") for label in view.labels)])
    if not view.rows:
        return head
    keys = [k for k, _ in SIDE_BY_SIDE_COLUMNS]
    body = UNITS + ":\n" + table([tuple(r[k] for k in keys) for r in view.rows],
                                 [h for _, h in SIDE_BY_SIDE_COLUMNS])
    notes = [n for n in (view.left_out, t.note if t is not None else "") if n]
    return f"{head}\n\n{body}" + "".join(f"\n{fold(n)}" for n in notes)
