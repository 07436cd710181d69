"""`gpuledger demo`: the whole pipeline on the embedded default.

1. Pick the month (the last complete calendar month unless `--period`), a fresh warehouse
   under the demo folder.
2. Simulate the fleet and load it, a day per transaction, rolling each day up to hourly
   card-hours once the next is loaded (a thread simulates ahead: `pipeline.load_and_rollup`);
   another thread keeps each loaded day's per-minute advice inputs in the day parts (0258).
3. Bill the month by team and print it, with the top idle allocations.
   Print one row of each fleet-advice kind (`recommend --kind`: catalog, fragmentation,
   overcommit, autoscaling), the one with the largest saving.
4. Propose a MIG plan and a quota plan (stored as `proposed`).
5. Write the month's reports (CSV, FOCUS, PDF) and say where.
6. Publish the dashboard's month results (recommendations, token costs, advice; the
   recommendations and advice of step 3 stored as they are; 0256) always, once, after the
   plans, so a later `gpuledger serve` shows every number the demo printed; then serve the
   dashboard (unless `--no-serve`) as a dev admin bound to loopback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuledger.command_context import Context
from gpuledger.commands._demo_waiting import print_waiting
from gpuledger.commands._output import cut
from gpuledger.core.config import utcnow
from gpuledger.core.errors import InputError
from gpuledger.core.period import Period

if TYPE_CHECKING:
    from gpuledger.analytics.advice.month import MonthAnalyses
    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.core.window import Window
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import Warehouse


@dataclass(frozen=True)
class DemoOptions:
    gpus: int = 256
    period: str | None = None
    seed: int = 7
    out_dir: str = "gpuledger-demo"
    serve: bool = True
    host: str = "127.0.0.1"
    port: int = 8050
    warehouse: Path | None = None


MIN_DEMO_GPUS = 40


def run_demo(options: DemoOptions, ctx: Context) -> int:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.warehouse import Warehouse

    started = time.perf_counter()
    if options.gpus < MIN_DEMO_GPUS:
        raise InputError(
            f"demo --gpus {options.gpus}: needs at least {MIN_DEMO_GPUS} (one 8-GPU node for each "
            "of the five pools: training, MIG, time-sliced, vGPU, inference)"
        )
    # 1. The month and a fresh warehouse.
    period = Period.parse(options.period, now=utcnow()) if options.period else Period.last_complete(utcnow())
    window = period.window
    out = Path(options.out_dir)
    wh_path = options.warehouse or out / "gpuledger.duckdb"
    for stale in (wh_path, Path(f"{wh_path}.wal")):
        stale.unlink(missing_ok=True)
    ctx.echo(f"gpuledger demo: {options.gpus} simulated GPUs, {period} "
             f"({window.hours / 24:.0f} days at 1-minute resolution), warehouse {wh_path}")
    spec = demo_fleet(options.gpus)
    sim = Simulation(spec, window, seed=options.seed,
                     idle_threshold=ctx.settings.idle.threshold,
                     idle_min_minutes=ctx.settings.idle.min_minutes)
    with Warehouse.open(wh_path, limits=ctx.settings.warehouse) as wh:
        _load(wh, sim, ctx)  # 2.
        # 3. The bill and the idle time.
        bill = _print_bill(wh, window, ctx)
        _print_idle(bill, ctx)
        month = _print_advice(wh, bill, ctx)
        print_waiting(wh, ctx)  # issue 35: capacity now and the top pending reasons
        # 5. The month's reports, from the month's analyses just computed (0256).
        from gpuledger.reports.monthly import issue_monthly

        report = issue_monthly(wh, ctx.settings, str(period), out / "reports", now=utcnow(), month=month)
        ctx.echo("")
        ctx.echo(f"Reports for {period} ({report.status}): {report.folder}")
        ctx.echo("  summary.csv, focus.parquet, one HTML + PDF statement per team, "
                 "fleet statement, manifest.json")
    # 4. Plans: the same code paths as `gpuledger optimize mig|quota` on this warehouse.
    demo_ctx = replace(ctx, warehouse_path=wh_path)
    _propose_plans(demo_ctx)
    _publish_results(wh_path, ctx, month)
    ctx.echo(f"demo finished in {time.perf_counter() - started:.0f}s; warehouse: {wh_path}")
    # 6. The dashboard.
    if options.serve:
        _serve(demo_ctx, options, str(period))
    return 0


def _load(wh: Warehouse, sim: Simulation, ctx: Context) -> None:
    """Step 2: simulate, load, roll up, overlapped a day apart (docs/decisions/0130), plus a DRA
    pool (docs/guide/dra.md); each day's advice inputs kept in the day parts as soon as it is
    loaded (`analytics.advice.run.keep_day`, decision 0258), so step 3 reads them back."""
    from gpuledger.analytics.advice.run import keep_day
    from gpuledger.pipeline import load_and_rollup
    from gpuledger.simulator.dra_fleet import DraFleet
    from gpuledger.warehouse.day_parts import kept_day_parts

    with kept_day_parts(wh.path) as days:
        each_day = None if days is None else lambda reader, day: keep_day(days, reader, day, ctx.settings)
        rows = load_and_rollup(wh, sim, ctx.settings, dra=DraFleet(sim.window), each_day=each_day)
    samples = wh.count("gpu_samples")
    ctx.echo(f"loaded {rows:,} rows ({samples:,} GPU samples) for {sim.gpu_count} GPUs "
             f"on {wh.count('nodes')} nodes, {wh.count('namespaces')} namespaces, "
             f"{wh.count('pods')} pods")


FRAGMENTED_MIG = {"1g.20gb": 2, "3g.40gb": 1}
"""A layout real MIG cards drift into as instances come and go: both 1g.20gb and the 3g hold
every memory slice, so the two free compute slices fit no profile (a fragmentation row)."""


def demo_fleet(gpus: int) -> FleetSpec:
    """The default fleet with its first MIG node on a fragmented layout (`FRAGMENTED_MIG`), so
    the demo shows each advice kind; later MIG nodes take the pool's usual configs in turn."""
    from gpuledger.simulator.fleet import FleetSpec

    data = FleetSpec.default(gpus=gpus).model_dump(mode="json")
    for pool in data["pools"]:
        if pool["sharing"] == "mig":
            pool["mig_configs"] = {"mixed-1g.20gb": FRAGMENTED_MIG, **pool["mig_configs"]}
    return FleetSpec.parse(data, source="demo fleet")


DEMO_ADMIN = "demo-admin"


def _serve(ctx: Context, options: DemoOptions, period: str) -> None:
    """Serve the dashboard as a dev admin on loopback (the dashboard refuses any other bind)."""
    from gpuledger.core.config import RoleBinding
    from gpuledger.dashboards.app import serve

    access = ctx.settings.access.model_copy(
        update={"roles": (*ctx.settings.access.roles, RoleBinding(subject=DEMO_ADMIN, role="admin"))}
    )
    settings = ctx.settings.model_copy(update={"access": access})
    serve(
        settings, ctx.warehouse_path, options.host, options.port, dev_user=DEMO_ADMIN,
        on_start=lambda url: ctx.echo(
            f"\ndashboard: {url.rstrip('/')}/?period={period}  (signed in as {DEMO_ADMIN}; Ctrl-C to stop)"
        ),
    )


def _publish_results(wh_path: Path, ctx: Context, month: MonthAnalyses) -> None:
    """The dashboard's month results, whether or not this run serves: `demo --no-serve` then
    `serve` shows what the CLI printed, never "not computed" where the demo computed it.
    Published after the plans, once: the plans' writers publish nothing while no store exists."""
    from gpuledger.dashboards.serving_results import refresh_serving
    from gpuledger.warehouse import Warehouse

    with Warehouse.open(wh_path, read_only=True, limits=ctx.settings.warehouse) as wh:
        refresh_serving(wh, ctx.settings, month=month)


def _propose_plans(ctx: Context) -> None:
    """Run `optimize mig|quota` as a user would, through the command itself, on this context."""
    from gpuledger.command_context import RunState
    from gpuledger.commands import optimize

    for kind in ("mig", "quota"):
        ctx.echo("")
        ctx.echo(f"Proposed {kind} plan (review it on the dashboard's Plans page or with "
                 "`gpuledger plans show ID`):")
        state = RunState(_ctx=ctx)
        limit = "20" if kind == "mig" else "90"  # the quota plan is backtested: several refits
        with optimize.command.make_context("optimize", [kind, "--time-limit", limit], obj=state) as cctx:
            optimize.command.invoke(cctx)


def _print_bill(wh: Warehouse, window: Window, ctx: Context) -> Bill:
    from gpuledger.analytics.billing.bill import compute_bill

    bill = compute_bill(wh, window, ctx.settings, by=("team",))
    ctx.echo("")
    ctx.echo(f"Bill for {bill.period} ({bill.currency}); fleet cost {bill.fleet_cost:,.2f} "
             f"for {bill.fleet_card_hours:,.0f} GPU-hours")
    ctx.echo(f"{'team':22s} {'GPU-hours':>12s} {'cost':>12s} {'idle GPU-h':>12s} {'idle cost':>11s}")
    for line in bill.lines.iter_rows(named=True):
        ctx.echo(f"{line['team']!s:22s} {line['card_hours']:12,.1f} {line['cost']:12,.2f} "
                 f"{line['idle_card_hours']:12,.1f} {line['idle_cost']:11,.2f}")
    _print_volcano_and_preemption(wh, bill, ctx)
    return bill


def _print_volcano_and_preemption(wh: Warehouse, bill: Bill, ctx: Context) -> None:
    """The Volcano-queued pool's Queues and the preemption line (docs/guide/volcano.md)."""
    from gpuledger.analytics.billing.preemption import preemption_totals
    from gpuledger.warehouse.queries.optimizer import queue_objects

    queues = queue_objects(wh, "Queue")["name"].to_list()
    lost = preemption_totals(bill.preemption)
    count = int(bill.preemption["preemptions"].sum()) if bill.preemption is not None else 0
    ctx.echo(f"Volcano queues: {', '.join(queues) or 'none'}; GPU-hours lost to preemption: "
             f"{lost['lost_gpu_hours']:,.1f} ({bill.currency} {lost['lost_cost']:,.2f}, "
             f"{count:,} preemptions; part of the GPU-hours above)")


def _print_idle(bill: Bill, ctx: Context, top: int = 10) -> None:
    from gpuledger.analytics.workloads.idle import idle_allocations

    idle = idle_allocations(bill).head(top)
    ctx.echo("")
    ctx.echo(f"Top {idle.height} idle allocations (held while GR_ENGINE_ACTIVE < "
             f"{ctx.settings.idle.threshold:.0%} for {ctx.settings.idle.min_minutes}+ minutes)")
    pods = [f"{row['namespace']}/{row['pod']}" for row in idle.iter_rows(named=True)]
    wide = max([len("namespace/pod"), *map(len, pods)])  # whole names: two pods never read the same
    ctx.echo(f"{'team':14s} {'namespace/pod':{wide}s} {'model':15s} {'idle GPU-h':>11s} {'idle cost':>10s}")
    for pod, row in zip(pods, idle.iter_rows(named=True), strict=True):
        ctx.echo(f"{row['team']!s:14s} {pod:{wide}s} {row['model']!s:15s} "
                 f"{row['idle_card_hours']:11,.1f} {row['idle_cost']:10,.2f}")


def _print_advice(wh: Warehouse, bill: Bill, ctx: Context) -> MonthAnalyses:
    """The largest actionable row of each advice kind (`analytics.advice.actionable`: a real
    saving or a risk; `gpuledger recommend --kind K` shows them all); returns the month's
    analyses (`bill`'s usage, its recommendations and every kind's advice), so the month's
    report and the dashboard's results do not run them again."""
    from gpuledger.analytics.advice.actionable import floor_of, priced, quiet_lines, saving, split
    from gpuledger.analytics.advice.month import MonthAnalyses
    from gpuledger.analytics.advice.run import run_advice
    from gpuledger.analytics.workloads.recommend import recommend
    from gpuledger.analytics.workloads.requested import workload_usage
    from gpuledger.warehouse.day_parts import kept_day_parts

    window = bill.window
    ctx.echo("")
    ctx.echo(f"Fleet advice, the largest saving of each kind (all of them: `gpuledger recommend --kind K "
             f"--period {window.start:%Y-%m}`)")
    ctx.echo(f"{'kind':22s} {'scope':32s} {'recommended':34s} {'saving/month':>12s}")
    usage = workload_usage(wh, window, ctx.settings, bill)
    with kept_day_parts(wh.path) as days:  # kept: the first refresh after a collect reads one day
        found = run_advice(wh, window, ctx.settings, (), bill=bill, usage=usage, days=days)
    floor = floor_of(ctx.settings)
    for advice in found:
        shown = split(advice.rows, floor)
        if not shown.rows:
            quiet = "; ".join(quiet_lines(shown.quiet, ctx.settings.currency))
            ctx.echo(f"{advice.kind:22s} (nothing worth acting on this month{': ' + quiet if quiet else ''})")
            continue
        row = shown.rows[0]
        scope, recommended = cut(str(row["scope"]), 32), cut(str(row["recommended"]), 34)
        amount = f"{saving(row):12,.2f}" if priced(row) else f"{'not priced':>12s}"  # a risk: unknown, not 0
        ctx.echo(f"{row['kind']!s:22s} {scope:32s} {recommended:34s} {amount}")
    found_recommendations = recommend(wh, window, ctx.settings, bill=bill, usage=usage)
    return MonthAnalyses(bill, usage, found_recommendations, tuple(found))
