"""Judge a stored quota plan on the twin and attach what it measured to the plan (issue 36 step 2).

    python -m tools.twin.judge WAREHOUSE PLAN_ID [--start ISO --minutes N] [--seconds-per-minute S]
                               [--borrowing]

Steps of `judge()`:
1. Read the plan (`PLAN_ID`: id, unique prefix or `latest`; a quota plan) and cut the window from the
   warehouse (`from_warehouse.window_from_warehouse`). Without `--start`: the busiest `--minutes`
   (by recorded pending workloads, `queue_samples`) of the plan's last held-out origin.
2. Two windows from it: every (ClusterQueue, flavor, resource) the plan lists at its `old_*` quotas
   (before) and at its `new_*` ones (after); the rest as stored. Cohorts are removed unless
   `--borrowing` (the backtest's headline is "under contention (no borrowing)").
3. Replay each on its own fresh twin (apiserver, kube-scheduler, Job controller, Kueue, KWOK; no
   object of one run can touch the other), workloads running at the window's start settled before
   the clock (`replay(settle_at_zero=True)`), the clock stopped at the window's end.
4. Per queue and resource, the twin's pending minutes and the product model's fed the same run's
   demand (`model_gap.compare`), into a `TwinEffect` attached to the plan through the product's
   store (`attach_twin_effect`: refused for another plan body; a re-run replaces the earlier one).
   Its note names the workloads no quota of their queue can hold (`never_admissible`).
The warehouse is opened read-only for step 1 and writable only for the attach, after the replays.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from gpuledger.core.config import utcnow
from gpuledger.core.errors import PlanError
from gpuledger.optimizer.plan.contract import Plan, QuotaChange, QuotaChanges
from gpuledger.optimizer.plan.twin_effect import TwinEffect, TwinTeam
from tools.k8s_testenv.versions import KUBERNETES_VERSION, KUEUE_VERSION
from tools.twin.flavors import FlavorQuota
from tools.twin.from_warehouse import pending_samples, window_from_warehouse
from tools.twin.harness import GPU
from tools.twin.model_gap import compare
from tools.twin.replay import ReplayResult, Window
from tools.twin_build.builder import TwinBuildError
from tools.twin_build.versions import KWOK_VERSION, Layout, default_cache_root

MEASURED_BY = f"kube-scheduler + Kueue {KUEUE_VERSION} on KWOK"
NAMESPACE = "twin-judge"

Runner = Callable[[Window, float, int], ReplayResult]
"""Replays a window on a twin: (window, seconds per simulated minute, minutes) -> result."""


@dataclass(frozen=True)
class Judgement:
    effect: TwinEffect
    before: ReplayResult
    after: ReplayResult
    before_window: Window
    after_window: Window


def _quota(x: FlavorQuota, change: QuotaChange | None, side: Literal["old", "new"]) -> FlavorQuota:
    if change is None:
        return x
    nominal, borrowing, lending = ((change.old_nominal, change.old_borrowing_limit, change.old_lending_limit)
                                   if side == "old" else
                                   (change.new_nominal, change.new_borrowing_limit, change.new_lending_limit))
    return replace(x, nominal=round(nominal), borrowing_limit=None if borrowing is None else round(borrowing),
                   lending_limit=None if lending is None else round(lending))


def with_plan_quotas(window: Window, changes: QuotaChanges, side: Literal["old", "new"], *,
                     borrowing: bool) -> Window:
    """Step 2: the window's queues at the plan's `side` quotas, cohorts removed unless `borrowing`."""
    per = {(c.cluster_queue, c.flavor, c.resource): c for c in changes.quotas}
    queues = []
    for q in window.queues:
        quotas = tuple(_quota(x, per.get((q.name, x.flavor, x.resource)), side) for x in q.quotas)
        gpus = sum(x.nominal for x in quotas if x.resource == GPU)
        queues.append(replace(q, quotas=quotas, nominal_gpus=gpus, cohort=q.cohort if borrowing else None))
    return replace(window, queues=tuple(queues))


def stored_differs(window: Window, changes: QuotaChanges) -> int:
    """How many of the plan's (queue, flavor, resource) quotas the warehouse stores at another
    nominal than the plan's `old_nominal` (the plan was computed from another state)."""
    stored = {(q.name, x.flavor, x.resource): x.nominal for q in window.queues for x in q.quotas}
    return sum(1 for c in changes.quotas if (c.cluster_queue, c.flavor, c.resource) in stored
               and stored[(c.cluster_queue, c.flavor, c.resource)] != round(c.old_nominal))


def never_admissible(window: Window) -> list[str]:
    """The workloads of `window` that no quota of their queue can ever hold, counted per (queue,
    amount, resource, flavor): Kueue leaves each pending for the whole run, while the model runs
    the part that fits unless its queue's smallest workload is that large (decisions 0246, 0249),
    so the note says where the twin's pending and the model's part ways. A queue holds at most
    its nominal on a flavor, plus its borrowing limit in a cohort (without one, the cohort's whole
    nominal there): an upper bound, so a workload above it is never admitted (lending limits only
    lower it)."""
    queues = {q.name: q for q in window.queues}

    def most(queue: str, x: FlavorQuota) -> int:
        q = queues[queue]
        if q.cohort is None:
            return x.nominal
        if x.borrowing_limit is not None:
            return x.nominal + x.borrowing_limit
        return sum(y.nominal for p in window.queues if p.cohort == q.cohort for y in p.flavor_quotas("")
                   if (y.flavor, y.resource) == (x.flavor, x.resource))

    found: dict[str, int] = {}
    for w in window.workloads:
        fits = [(x.flavor, most(w.queue, x)) for x in queues[w.queue].flavor_quotas("")
                if x.resource == w.resource and w.flavor in (None, x.flavor)]
        if fits and all(w.gpus > m for _, m in fits):
            flavor, m = max(fits, key=lambda f: f[1])
            where = f" on {flavor}" if flavor else ""
            key = f"{w.queue}: {w.gpus} {w.resource}{where} (at most {m})"
            found[key] = found.get(key, 0) + 1
    return [f"{n} x {key}" if n > 1 else key for key, n in found.items()]


def admissibility_note(windows: dict[Literal["old", "new"], Window]) -> str:
    """One sentence naming the workloads `never_admissible` finds before and after the plan."""
    found = {side: never_admissible(w) for side, w in windows.items()}
    if not any(found.values()):
        return ""
    if found["old"] == found["new"]:
        return f"Never admissible under either quota set, so pending all window: {'; '.join(found['old'])}."
    said = [f"under the plan's '{'before' if side == 'old' else 'after'}' quotas: {'; '.join(names)}"
            for side, names in found.items() if names]
    return f"Never admissible, so pending all window, {' and '.join(said)}."


def busiest_start(samples: dict[str, tuple[list[datetime], list[float]]], start: datetime, end: datetime,
                  minutes: int) -> datetime:
    """The start of the `minutes`-long slot of [start, end) with the most recorded pending
    workloads (summed over queues and samples); the earliest on a tie, `start` when none pends."""
    slot = timedelta(minutes=minutes)
    totals: dict[int, float] = {}
    for times, counts in samples.values():
        for t, n in zip(times, counts, strict=True):
            k = int((t - start) / slot)
            totals[k] = totals.get(k, 0.0) + n
    slots = [k for k in totals if start + (k + 1) * slot <= end and totals[k] > 0]
    return start + min(slots, key=lambda k: (-totals[k], k)) * slot if slots else start


def fresh_twin_runner(layout: Layout) -> Runner:
    """Step 3: each replay on its own apiserver and twin, torn down after."""
    def run(window: Window, seconds_per_minute: float, minutes: int) -> ReplayResult:
        from kubernetes import client

        from tools.k8s_testenv.pytest_plugin import running_cluster
        from tools.twin.harness import Twin
        from tools.twin.replay import replay, timed_stages

        with tempfile.TemporaryDirectory() as tmp, running_cluster(Path(tmp) / "cluster") as cluster, \
                Twin(cluster, layout, Path(tmp) / "twin", stages=timed_stages(layout)) as twin:
            twin.start_job_controller()
            twin.start_kueue()
            with cluster.api_client() as api:
                client.CoreV1Api(api).create_namespace(
                    client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
            return replay(twin, window, NAMESPACE, seconds_per_minute=seconds_per_minute, end_min=minutes,
                          settle_at_zero=True, ready_timeout_s=600)
    return run


def source_commit() -> str:
    """The commit of this checkout ("" outside git), "+dirty" when tools/twin has local changes."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "tools/twin"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+dirty" if dirty else "")


Rows = dict[str, dict[str, float]]


def team_figures(before: Rows, after: Rows) -> tuple[TwinTeam, ...]:
    """Step 4: `model_gap.compare` rows ('queue' or 'queue resource') of both runs, per team and
    resource (a row one run lacks had no demand there: 0)."""
    out = []
    for key in sorted(set(before) | set(after)):
        team, _, resource = key.partition(" ")
        b, a = before.get(key, {}), after.get(key, {})
        out.append(TwinTeam(team=team, resource=resource or GPU,
                            twin_before=float(b.get("twin_pending_gpu_min", 0.0)),
                            twin_after=float(a.get("twin_pending_gpu_min", 0.0)),
                            model_before=float(b.get("model_pending_gpu_min", 0.0)),
                            model_after=float(a.get("model_pending_gpu_min", 0.0))))
    return tuple(out)


def _cut(warehouse: Path, plan_id: str, start: datetime | None, minutes: int
         ) -> tuple[Plan, Window, int, datetime]:
    """Step 1: the plan, the window as stored, the pods skipped and the window's start."""
    from gpuledger.optimizer.plan.store import load_plan, resolve_plan_id
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        plan = load_plan(wh, resolve_plan_id(wh, plan_id))
        if not isinstance(plan.changes, QuotaChanges):
            raise PlanError(f"plan {plan.id}: a {plan.kind} plan; the twin judges quota plans")
        if start is None:
            origins = plan.evaluation.origins if plan.evaluation is not None else ()
            if not origins:
                raise PlanError(f"plan {plan.id}: no held-out window to pick from; give --start")
            o = origins[-1]
            start = busiest_start(pending_samples(wh, o.start, o.end), o.start, o.end, minutes)
        cut = window_from_warehouse(wh, start, start + timedelta(minutes=minutes))
    return plan, cut.window, cut.skipped, start


def judge(warehouse: Path, plan_id: str, *, start: datetime | None = None, minutes: int = 30,
          seconds_per_minute: float = 10.0, borrowing: bool = False, runner: Runner | None = None,
          actor: str = "twin-judge") -> Judgement:
    """Steps 1-4 of the module docstring; returns the attached effect and both replays."""
    from gpuledger.optimizer.plan.store import attach_twin_effect
    from gpuledger.warehouse import Warehouse

    plan, window, skipped, start = _cut(warehouse, plan_id, start, minutes)
    assert isinstance(plan.changes, QuotaChanges)
    run = runner or fresh_twin_runner(Layout(default_cache_root()))
    sides: tuple[Literal["old", "new"], ...] = ("old", "new")
    windows = {side: with_plan_quotas(window, plan.changes, side, borrowing=borrowing) for side in sides}
    results = {side: run(w, seconds_per_minute, minutes) for side, w in windows.items()}
    differs = stored_differs(window, plan.changes)
    effect = TwinEffect(
        plan_id=plan.id, plan_fingerprint=plan.fingerprint, measured_by=MEASURED_BY,
        versions={"kubernetes": KUBERNETES_VERSION, "kueue": KUEUE_VERSION, "kwok": KWOK_VERSION},
        source_commit=source_commit(), window_start=start, window_end=start + timedelta(minutes=minutes),
        seconds_per_minute=seconds_per_minute, borrowing=borrowing, workloads=len(window.workloads),
        skipped=skipped, finished=(results["old"].finished, results["new"].finished),
        teams=team_figures(compare(results["old"], windows["old"]),
                           compare(results["new"], windows["new"])),
        measured_at=utcnow(),
        note=" ".join(n for n in (
            (f"{differs} of the plan's quotas are stored at another value than its 'before'; "
             "the twin replayed the plan's 'before'.") if differs else "",
            admissibility_note(windows)) if n))
    with Warehouse.open(warehouse) as wh:
        attach_twin_effect(wh, effect, actor=actor)
    return Judgement(effect, results["old"], results["new"], windows["old"], windows["new"])


def utc_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text}: give a time zone (e.g. 2026-11-21T04:00:00Z)")
    return moment


def main(argv: list[str] | None = None) -> int:
    from gpuledger.optimizer.plan.render import fold, table
    from gpuledger.optimizer.plan.render_twin import render_side_by_side

    parser = argparse.ArgumentParser(prog="python -m tools.twin.judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("plan_id", help="id, unique prefix or 'latest'")
    parser.add_argument("--start", type=utc_time, help="window start (default: the busiest slot held out)")
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--seconds-per-minute", type=float, default=10.0)
    parser.add_argument("--borrowing", action="store_true", help="keep the cohorts as stored")
    args = parser.parse_args(argv)
    try:
        done = judge(args.warehouse, args.plan_id, start=args.start, minutes=args.minutes,
                     seconds_per_minute=args.seconds_per_minute, borrowing=args.borrowing)
    except (TwinBuildError, PlanError) as exc:
        print(f"twin judge: {exc}", file=sys.stderr)
        return 2
    from gpuledger.optimizer.plan.store import load_plan
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(args.warehouse, read_only=True) as wh:
        plan = load_plan(wh, done.effect.plan_id)
    print(f"plan {plan.id}: twin effect attached")
    print(render_side_by_side(plan.evaluation, done.effect, table, fold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
