"""`gpuledger optimize mig|quota`: compute a plan, print it, store it as `proposed`.

Inputs come from the warehouse (what the collectors saw) or, for what-if runs, from files:
`--fleet`/`--demand` for MIG, `--queues`/`--history` for quotas (formats in the README).
`--no-save` prints without storing. The plan is printed as a readable diff or as JSON.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuledger.command_context import Context
from gpuledger.commands import AddCommand

if TYPE_CHECKING:
    from gpuledger.optimizer.plan import Plan


def _no_kind(args: argparse.Namespace, ctx: Context) -> int:
    args.optimize_parser.print_help()
    return 2


def _finish(plan: Plan, args: argparse.Namespace, ctx: Context) -> int:
    """Store (unless --no-save) and print."""
    from gpuledger.optimizer.plan_render import plan_json, render_plan
    from gpuledger.optimizer.plan_store import save_plan

    status = None
    if not args.no_save:
        with ctx.open_warehouse() as wh:
            save_plan(wh, plan, actor="optimizer")
        status = "proposed"
    if args.format == "json":
        ctx.echo(plan_json(plan))
    else:
        ctx.echo(render_plan(plan, status))
        if status:
            ctx.echo(f"\nstored as {status}: gpuledger plans show {plan.id}")
    return 0


def _mig(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.core.config import utcnow
    from gpuledger.optimizer.deadline import command_deadline
    from gpuledger.optimizer.mig import MigOptions, plan_mig

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
        plan = plan_mig(fleet, demand, options, settings, now)
    return _finish(plan, args, ctx)


def _mig_inputs(args: argparse.Namespace, ctx: Context) -> tuple[Any, Any, dict[str, str]]:
    """The fleet and the demand: from files (what-if) or from the warehouse."""
    from gpuledger.core.errors import InputError
    from gpuledger.core.window import parse_duration
    from gpuledger.optimizer.mig_input import load_demand, load_fleet

    inputs: dict[str, str] = {}
    if args.fleet:
        if not args.demand:
            raise InputError("--fleet needs --demand (a what-if run reads both from files)")
        return load_fleet(args.fleet), load_demand(args.demand), inputs
    from gpuledger.optimizer.mig_warehouse import (
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
    from gpuledger.optimizer.quota import QuotaOptions, plan_quota
    from gpuledger.optimizer.quota_input import load_quota_inputs, quota_inputs_from_warehouse

    now = utcnow()
    limit = _time_limit(args, ctx)
    horizon = parse_duration(args.horizon)
    QuotaOptions(time_limit_s=limit, horizon=horizon, workers=args.workers)  # refuse bad flags first
    with command_deadline(limit, "optimize quota") as deadline:
        if args.queues:
            inputs = load_quota_inputs(args.queues, args.history)
        else:
            with ctx.open_warehouse(read_only=True) as wh:
                inputs = quota_inputs_from_warehouse(wh, parse_duration(args.lookback))
        options = QuotaOptions(time_limit_s=deadline.solver_budget(), horizon=horizon,
                               workers=args.workers)
        plan = plan_quota(inputs, options, ctx.settings, now)
    return _finish(plan, args, ctx)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="wall-clock bound in seconds for reading the inputs and solving (default: "
                        "plans.solver_time_limit_s); the best plan found is returned with its "
                        "status, and a run that cannot finish in time fails with nothing stored")
    p.add_argument("--workers", type=int, default=2, help="CP-SAT worker threads (default 2)")
    p.add_argument("--no-save", action="store_true", help="print only; do not store the plan")


def register(add_command: AddCommand) -> None:
    parser = add_command("optimize", "compute a MIG or quota plan and store it as proposed", _no_kind)
    parser.set_defaults(optimize_parser=parser)
    kinds = parser.add_subparsers(dest="kind", metavar="KIND")
    from gpuledger.commands import global_options

    inherited: list[Any] = [global_options(suppress=True)]

    mig = kinds.add_parser("mig", help="repartition MIG GPUs", description=(
        "Repartition MIG GPUs: meet the demand, then use fewest GPUs, then change fewest, then "
        "strand fewest slices."), parents=inherited)
    mig.add_argument("--fleet", type=Path, help="what-if: fleet file (nodes, GPUs, layouts, busy pods)")
    mig.add_argument("--demand", type=Path, help="demand file (profile counts or workloads)")
    mig.add_argument("--pool", action="append",
                     help="plan GPUs of this pool (repeatable; default: pools in MIG mode)")
    mig.add_argument("--nodes", action="append", metavar="GLOB",
                     help="only nodes matching a glob are in a maintenance window (repeatable)")
    mig.add_argument("--lookback", default="7d",
                     help="warehouse demand: right-size (or observe) over this long (default 7d)")
    mig.add_argument("--observed", action="store_true",
                     help="demand = MIG instances that held a pod in the lookback, not right-sized")
    mig.add_argument("--max-changes-per-node", type=int, metavar="K",
                     help="at most K GPUs changed per node (default: plans.max_gpus_changed_per_node)")
    mig.add_argument("--max-changes-per-plan", type=int, metavar="K",
                     help="at most K GPUs changed in the plan (default: plans.max_gpus_changed_per_plan)")
    _common(mig)
    mig.set_defaults(handler=_mig)

    quota = kinds.add_parser("quota", help="rebalance Kueue ClusterQueue quotas", description=(
        "Rebalance Kueue quotas: least expected unmet demand, then weighted fairness, then fewest "
        "changes; replays the recorded demand against old and new quotas."), parents=inherited)
    quota.add_argument("--queues", type=Path, help="what-if: file with ClusterQueues and capacity")
    quota.add_argument("--history", type=Path, help="demand history file (CSV or YAML)")
    quota.add_argument("--lookback", default="28d", help="warehouse history used (default 28d)")
    quota.add_argument("--horizon", default="7d", help="forecast horizon (default 7d)")
    _common(quota)
    quota.set_defaults(handler=_quota)

