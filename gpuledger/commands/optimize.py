"""`gpuledger optimize mig|quota`: compute a plan, print it, store it as `proposed`.

Inputs come from the warehouse (what the collectors saw) or, for what-if runs, from files:
`--fleet`/`--demand` for MIG, `--queues`/`--history` for quotas (formats in the README).
`--no-save` prints without storing. The plan is printed as a readable diff or as JSON.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import F, VerbGroup, output_option, runs
from gpuledger.commands._output import emit

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import Plan


@click.group("optimize", cls=VerbGroup, invoke_without_command=True,
             help="compute a MIG or quota plan and store it as proposed")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    click.echo(click.get_current_context().get_help())
    return 2


def _finish(plan: Plan, args: argparse.Namespace, ctx: Context) -> int:
    """Propose (unless --no-save or --backtest) and print. A plan without a measured gain is
    printed with its reason and not stored; a re-run supersedes its own earlier proposal."""
    from gpuledger.commands._plans_view import plan_rows, plan_text
    from gpuledger.optimizer.plan.render import plan_json
    from gpuledger.optimizer.plan.store import propose_plan

    status = None
    footer: list[str] = []
    if plan.proposes_nothing is not None:
        footer.append(f"\nnothing proposed: {plan.proposes_nothing}")
    elif not (args.no_save or getattr(args, "backtest", False)):
        with ctx.open_warehouse() as wh:
            outcome = propose_plan(wh, plan, actor="optimizer")
        status = "proposed"
        footer.append(f"\nstored as {status}: gpuledger plans show {plan.id}")
        footer.extend(f"supersedes {old} (same observed state)" for old in outcome.superseded)
    text = plan_json(plan)
    emit(ctx, args.format, json_text=text, rows=plan_rows(text), text=plan_text(plan, status, args.format),
         footer=footer)
    return 0


def _mig(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.config import utcnow
    from gpuledger.optimizer.deadline import command_deadline
    from gpuledger.optimizer.mig.planner import MigOptions, plan_mig
    from gpuledger.terminal_progress import busy

    now = utcnow()
    settings = ctx.settings
    limit = _time_limit(args, ctx)
    per_node = args.max_changes_per_node
    if per_node is None:
        per_node = settings.plans.max_gpus_changed_per_node
    per_plan = args.max_changes_per_plan
    if per_plan is None:
        per_plan = settings.plans.max_gpus_changed_per_plan
    MigOptions(time_limit_s=limit, max_changes_per_node=per_node, max_changes_per_plan=per_plan,
               workers=args.workers)  # refuses bad limits before any file is read
    with command_deadline(limit, "optimize mig") as deadline:
        fleet, demand, inputs = _mig_inputs(args, ctx)
        options = MigOptions(
            time_limit_s=deadline.solver_budget(),
            max_changes_per_node=per_node, max_changes_per_plan=per_plan, workers=args.workers,
            inputs=inputs,
        )
        with busy(f"solving the MIG plan (at most {limit:g} s)"):
            plan = plan_mig(fleet, demand, options, settings, now)
    return _finish(plan, args, ctx)


def _mig_inputs(args: argparse.Namespace, ctx: Context) -> tuple[Any, Any, dict[str, str]]:
    """The fleet and the demand: from files (what-if) or from the warehouse."""
    from gpuledger.core.errors import InputError
    from gpuledger.core.window import parse_duration
    from gpuledger.optimizer.mig.inputs import load_demand, load_fleet

    inputs: dict[str, str] = {}
    if args.fleet:
        if not args.demand:
            raise InputError("--fleet needs --demand (a what-if run reads both from files)")
        return load_fleet(args.fleet), load_demand(args.demand), inputs
    from gpuledger.optimizer.mig.observed import (
        load_fleet_from_warehouse,
        observed_demand,
        recommended_demand,
    )

    with ctx.open_warehouse(read_only=True) as wh:
        fleet = load_fleet_from_warehouse(wh, pools=args.pool or (), nodes=args.nodes or ())
        lookback = parse_duration(args.lookback)
        if args.demand:
            return fleet, load_demand(args.demand), inputs
        if args.observed:
            return fleet, observed_demand(wh, fleet, lookback), inputs
        found = recommended_demand(wh, fleet, ctx.settings, lookback)
        if found is None:
            inputs["demand_note"] = "no samples to right-size from: observed instances in use"
            return fleet, observed_demand(wh, fleet, lookback), inputs
        return fleet, found, inputs


def _time_limit(args: argparse.Namespace, ctx: Context) -> float:
    """`--time-limit` (0 is a value, not "unset") or the configured limit, validated."""
    from gpuledger.optimizer.solver_status import check_solver_limits

    limit = args.time_limit if args.time_limit is not None else ctx.settings.plans.solver_time_limit_s
    check_solver_limits(limit, args.workers)
    return float(limit)


def _quota(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.config import utcnow
    from gpuledger.core.window import parse_duration
    from gpuledger.optimizer.deadline import command_deadline
    from gpuledger.optimizer.quota.inputs import load_quota_inputs, quota_inputs_from_warehouse
    from gpuledger.optimizer.quota.planner import QuotaOptions, plan_quota
    from gpuledger.terminal_progress import busy

    now = utcnow()
    limit = _time_limit(args, ctx)
    horizon = parse_duration(args.horizon)
    QuotaOptions(time_limit_s=limit, horizon=horizon, workers=args.workers)  # refuse bad flags first
    with command_deadline(limit, "optimize quota") as deadline:
        system = args.queue_system or ctx.settings.queues.systems[0]
        dra = ctx.settings.queues.kueue_dra_resources
        if args.queues:
            inputs = load_quota_inputs(args.queues, args.history, queue_system=system, dra=dra)
        else:
            with ctx.open_warehouse(read_only=True) as wh:
                inputs = quota_inputs_from_warehouse(wh, parse_duration(args.lookback),
                                                     queue_system=system, dra=dra)
        options = QuotaOptions(time_limit_s=deadline.solver_budget(), horizon=horizon,
                               workers=args.workers)
        with busy(f"solving and backtesting the quota plan (at most {limit:g} s)"):
            plan = plan_quota(inputs, options, _backtest_settings(args, ctx), now)
    return _finish(plan, args, ctx)


def _backtest_settings(args: argparse.Namespace, ctx: Context) -> Any:
    """The settings with `--origins` / `--held-out` applied to `plans.quota`."""
    from gpuledger.core.config_plans import QuotaPlanSettings
    from gpuledger.core.errors import InputError
    from gpuledger.core.window import parse_duration

    quota = ctx.settings.plans.quota
    update: dict[str, Any] = {}
    if args.origins is not None:
        update["backtest_origins"] = args.origins
    if args.held_out is not None:
        update["backtest_days"] = parse_duration(args.held_out).total_seconds() / 86_400
    if not update:
        return ctx.settings
    try:
        checked = QuotaPlanSettings.model_validate({**quota.model_dump(), **update})
    except ValueError as exc:
        first = str(exc).splitlines()
        raise InputError(f"--origins/--held-out: {first[-1].strip() if first else exc}") from None
    plans = ctx.settings.plans.model_copy(update={"quota": checked})
    return ctx.settings.model_copy(update={"plans": plans})


def _common(f: F) -> F:
    f = click.option("--no-save", is_flag=True, help="print only; do not store the plan")(f)
    f = click.option("--workers", type=int, default=2, show_default=True, help="CP-SAT worker threads")(f)
    f = click.option("--time-limit", type=float, metavar="S",
                     help="wall-clock bound in seconds for reading the inputs and solving (default: "
                          "plans.solver_time_limit_s); the best plan found is returned with its "
                          "status, and a run that cannot finish in time fails with nothing stored")(f)
    return output_option()(f)


@command.command("mig", help=(
    "Repartition MIG GPUs: meet the demand, then use fewest GPUs, then change fewest, then "
    "strand fewest slices."), short_help="repartition MIG GPUs")
@click.option("--fleet", type=click.Path(path_type=Path),
              help="what-if: fleet file (nodes, GPUs, layouts, busy pods)")
@click.option("--demand", type=click.Path(path_type=Path), help="demand file (profile counts or workloads)")
@click.option("--pool", multiple=True, help="plan GPUs of this pool (repeatable; default: pools in MIG mode)")
@click.option("--nodes", multiple=True, metavar="GLOB",
              help="only nodes matching a glob are in a maintenance window (repeatable)")
@click.option("--lookback", default="7d", show_default=True,
              help="warehouse demand: right-size (or observe) over this long")
@click.option("--observed", is_flag=True,
              help="demand = MIG instances that held a pod in the lookback, not right-sized")
@click.option("--max-changes-per-node", type=int, metavar="K",
              help="at most K GPUs changed per node (default: plans.max_gpus_changed_per_node)")
@click.option("--max-changes-per-plan", type=int, metavar="K",
              help="at most K GPUs changed in the plan (default: plans.max_gpus_changed_per_plan)")
@_common
@runs
def mig_command(args: argparse.Namespace, ctx: Context) -> int:
    return _mig(args, ctx)


@command.command("quota", help=(
    "Rebalance Kueue quotas: least expected unmet demand, then weighted fairness, then fewest "
    "changes, keeping each queue's demand floor and no queue worse by more than "
    "plans.quota.max_pending_rise_share of its demand. The expected effect is a rolling-origin "
    "backtest on held-out days; below plans.quota.min_gain_share nothing is proposed."),
    short_help="rebalance Kueue ClusterQueue quotas")
@click.option("--queues", type=click.Path(path_type=Path),
              help="what-if: file with ClusterQueues and capacity")
@click.option("--history", type=click.Path(path_type=Path), help="demand history file (CSV or YAML)")
@click.option("--lookback", default="28d", show_default=True, help="warehouse history used")
@click.option("--horizon", default="7d", show_default=True, help="forecast horizon")
@click.option("--backtest", is_flag=True,
              help="evaluate only: print the out-of-sample backtest and the plan, store nothing")
@click.option("--origins", type=int, metavar="N",
              help="backtest origins (default: plans.quota.backtest_origins)")
@click.option("--held-out", metavar="DURATION",
              help="held-out window per origin, e.g. 2d (default: plans.quota.backtest_days, "
                   "else the horizon)")
@click.option("--queue-system", metavar="NAME",
              help="whose quotas to plan: kueue (ClusterQueues) or volcano (Queues); default: the "
                   "first of queues.systems")
@_common
@runs
def quota_command(args: argparse.Namespace, ctx: Context) -> int:
    return _quota(args, ctx)
