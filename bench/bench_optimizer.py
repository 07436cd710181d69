"""Benchmark: the optimizer against its baselines, side by side in one run.

MIG (synthetic fleets: A100-80GB, H100-80GB, H200-141GB nodes of 8, random current layouts,
20% of instances busy, 1% of those pinned, 10% whole cards, demand at 80% of capacity):
1. 1,000 and 10,000 GPUs: solver time and status (goal: proven optimal in ≤ 5 s / ≤ 30 s),
   GPUs used vs the slice lower bound and vs first-fit / first-fit-decreasing on the same input;
   plus a fresh fleet (no busy or pinned pods) where the lower bound is attainable;
2. steady state: apply the plan, move the demand by up to ±3% per profile, plan again: share of
   GPUs changed (goal ≤ 5%).
Quota:
3. 50 teams × 10 flavors (500 series, seasonal synthetic demand, 28 days): solver time
   (goal ≤ 2 s), fitted on 3 weeks and replayed on the 4th against static hard quotas (goal:
   ≥ 30% fewer pending GPU-minutes at equal capacity), the current quotas with cohort
   borrowing, and demand-proportional quotas;
4. the simulator's month (`--sim-gpus` GPUs): the same replay on its Kueue demand, and the
   right-sizing figure: GPUs needed after right-sizing (analytics) + MIG packing (this
   optimizer) vs whole-GPU allocation of the same workloads (goal ≥ 25% fewer).

Run: `python -m bench.bench_optimizer` (add `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import peak_rss_mib, write_result
from gpuledger.core.config import Settings
from gpuledger.optimizer.mig import MigOptions, plan_mig
from gpuledger.optimizer.mig_input import Demand, Fleet, Gpu, ModelDemand, Node
from gpuledger.optimizer.mig_synthetic import random_demand, random_fleet
from gpuledger.optimizer.plan import MigChanges, Plan
from gpuledger.optimizer.quota import QuotaOptions, plan_quota
from gpuledger.optimizer.quota_synthetic import synthetic_quota_inputs

NOW = datetime(2026, 11, 5, tzinfo=UTC)
SETTINGS = Settings()


# 1-2. MIG -------------------------------------------------------------------------------------
def mig_case(gpus: int, limit: float, *, fresh: bool = False, seed: int = 1) -> dict[str, Any]:
    fleet = random_fleet(gpus, seed=seed, busy_fraction=0.0 if fresh else 0.2,
                         pinned_fraction=0.0 if fresh else 0.01)
    demand = random_demand(fleet, 0.8, seed=seed)
    started = time.perf_counter()
    plan = plan_mig(fleet, demand, MigOptions(time_limit_s=limit), SETTINGS, NOW)
    total = time.perf_counter() - started
    e = plan.effect
    base = {b.name: b.figures for b in plan.baselines}
    ff, ffd = base["first-fit"], base["first-fit-decreasing"]
    figures: dict[str, Any] = {
        "gpus": gpus, "fresh_fleet": fresh, "time_limit_s": limit,
        "solver_status": plan.solver.status, "solver_s": plan.solver.wall_s, "plan_total_s": round(total, 2),
        "stages": [{"name": s.name, "status": s.status, "objective": s.objective, "s": round(s.wall_s, 3)}
                   for s in plan.solver.stages],
        "gpus_used_before": e.gpus_used_before, "gpus_used": e.gpus_used_after,
        "slice_lower_bound": e.slice_lower_bound,
        "gap_to_lower_bound": (e.gpus_used_after or 0) - (e.slice_lower_bound or 0),
        "unmet_instances": e.unmet_instances, "gpus_changed": e.gpus_changed,
        "slices_stranded": e.slices_stranded_after,
        "first_fit": ff, "first_fit_decreasing": ffd,
        "margin_gpus_vs_first_fit": int(ff["gpus_used_after"] or 0) - int(e.gpus_used_after or 0),
        "margin_gpus_vs_first_fit_decreasing": int(ffd["gpus_used_after"] or 0) - int(e.gpus_used_after or 0),
        "goal_s": None if fresh else 5 if gpus <= 1000 else 30,
    }
    if not fresh:
        figures["goal_met"] = plan.solver.status == "OPTIMAL" and plan.solver.wall_s <= figures["goal_s"]
    else:
        figures["lower_bound_attained"] = e.gpus_used_after == e.slice_lower_bound
    if not fresh:
        figures["steady_state"] = steady_state(fleet, demand, plan, limit, seed)
    print(f"mig {gpus} fresh={fresh}: {plan.solver.status} in {plan.solver.wall_s:.2f}s, used "
          f"{e.gpus_used_after} (LB {e.slice_lower_bound}, FF {ff['gpus_used_after']}, "
          f"FFD {ffd['gpus_used_after']})", flush=True)
    return figures


def apply(fleet: Fleet, plan: Plan) -> Fleet:
    """The fleet after the plan: new layouts; pods on changed GPUs are gone."""
    assert isinstance(plan.changes, MigChanges)
    final: dict[tuple[str, int], Any] = {}
    for node in plan.changes.nodes:
        for group in node.mig_parted:
            config = tuple(sorted(group.mig_devices.items())) if group.mig_enabled else None
            for idx in group.devices:
                final[(node.node, idx)] = config
    nodes = []
    for n in fleet.nodes:
        gpus = tuple(
            Gpu(node=g.node, index=g.index, model=g.model, config=final[(g.node, g.index)], uuid=g.uuid)
            if (g.node, g.index) in final and final[(g.node, g.index)] != g.config else g
            for g in n.gpus
        )
        nodes.append(Node(name=n.name, gpus=gpus, in_maintenance_window=n.in_maintenance_window))
    return Fleet(tuple(nodes), fleet.source + " (plan applied)")


def perturb(demand: Demand, seed: int, amount: float = 0.03) -> Demand:
    rng = random.Random(seed)
    out = []
    for d in demand.models:
        def moved(n: int) -> int:
            return max(0, round(n * (1 + rng.uniform(-amount, amount))))

        out.append(ModelDemand(d.model, {p: moved(n) for p, n in d.profiles.items()}, moved(d.whole)))
    return Demand(tuple(out), demand.source + f" ±{amount:.0%}")


def steady_state(fleet: Fleet, demand: Demand, plan: Plan, limit: float, seed: int) -> dict[str, Any]:
    after = apply(fleet, plan)
    rounds = []
    current, current_demand = after, demand
    for k in range(3):
        current_demand = perturb(current_demand, seed * 100 + k)
        options = MigOptions(time_limit_s=limit, baselines=False)
        nxt = plan_mig(current, current_demand, options, SETTINGS, NOW)
        share = round((nxt.effect.gpus_changed or 0) / len(fleet.gpus), 4)
        rounds.append({"gpus_changed": nxt.effect.gpus_changed, "share": share,
                       "status": nxt.solver.status, "unmet_instances": nxt.effect.unmet_instances})
        current = apply(current, nxt)
    worst = max(float(r["share"] or 0) for r in rounds)
    return {"rounds": rounds, "max_share_changed": worst, "goal_max_share": 0.05, "goal_met": worst <= 0.05}


# 3. Quota, synthetic ---------------------------------------------------------------------------
def quota_case(teams: int, flavors: int, per_team: int, days: int = 28) -> dict[str, Any]:
    start = datetime(2026, 10, 5, tzinfo=UTC)
    inputs = synthetic_quota_inputs(teams, flavors, flavors_per_team=per_team, days=days,
                                    step=timedelta(minutes=15), start=start, seed=3)
    cut = start + timedelta(days=days - 7)
    train = replace(inputs, history=inputs.history.filter(pl.col("ts") < cut))
    test = inputs.history.filter(pl.col("ts") >= cut)
    started = time.perf_counter()
    plan = plan_quota(train, QuotaOptions(time_limit_s=30, replay_history=test), SETTINGS, NOW)
    total = time.perf_counter() - started
    figures = quota_figures(plan)
    figures.update({
        "teams": teams, "flavors": flavors, "flavors_per_team": per_team,
        "series": sum(len(q.quotas) for q in inputs.queues), "history_days": days,
        "solver_status": plan.solver.status, "solver_s": plan.solver.wall_s,
        "stages": [{"name": s.name, "status": s.status, "s": round(s.wall_s, 3)} for s in plan.solver.stages],
        "plan_total_s": round(total, 2), "goal_solver_s": 2.0,
        "goal_solver_met": plan.solver.wall_s <= 2.0 and plan.solver.status == "OPTIMAL",
    })
    print(f"quota {teams}x{flavors}: {plan.solver.status} in {plan.solver.wall_s:.2f}s; pending "
          f"{figures['pending_gpu_minutes']}", flush=True)
    return figures


def quota_figures(plan: Plan) -> dict[str, Any]:
    base = {b.name: b.figures for b in plan.baselines}
    static = base["hard quotas (current nominal, no borrowing)"]
    nominal_only = base["hard quotas (this plan's nominal, no borrowing)"]
    proportional = base["nominal proportional to mean demand"]
    hard = float(static["pending_gpu_minutes_after"] or 0)
    hard_new = float(nominal_only["pending_gpu_minutes_after"] or 0)
    ours = float(plan.effect.pending_gpu_minutes_after or 0)
    current = float(plan.effect.pending_gpu_minutes_before or 0)

    def fewer(a: float, b: float) -> float | None:
        return round(1 - a / b, 4) if b else None

    return {
        "pending_gpu_minutes": {
            "this_plan": ours,
            "static_hard_quotas": hard,
            "current_quotas_with_cohort_borrowing": current,
            "this_plan_nominal_without_borrowing": hard_new,
            "proportional_to_mean_demand": proportional["pending_gpu_minutes_after"],
        },
        "idle_quota_gpu_minutes": {
            "this_plan": plan.effect.idle_quota_gpu_minutes_after,
            "static_hard_quotas": static["idle_quota_gpu_minutes_after"],
        },
        "fewer_pending_vs_static_hard": fewer(ours, hard),
        "fewer_pending_nominal_only_vs_static_hard": fewer(hard_new, hard),
        "fewer_pending_vs_current_with_borrowing": fewer(ours, current),
        "goal_fewer_pending": 0.30,
        "goal_met": (fewer(ours, hard) or 0) >= 0.30,
    }


# 4. The simulator's month ----------------------------------------------------------------------
def simulator_month(gpus: int, days: int) -> dict[str, Any]:
    from gpuledger.analytics.recommend import rightsized_demand
    from gpuledger.core.window import Window
    from gpuledger.optimizer.quota_input import quota_inputs_from_warehouse
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import LoadBatch, Warehouse

    start = datetime(2026, 10, 1, tzinfo=UTC)
    window = Window(start, start + timedelta(days=days))
    out: dict[str, Any] = {"gpus": gpus, "days": days}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "month.duckdb"
        started = time.perf_counter()
        sim = Simulation(FleetSpec.default(gpus=gpus), window, seed=7)
        with Warehouse.open(path) as wh:
            wh.load(LoadBatch(frames=sim.inventory()))
            for chunk, frames in sim.batches(chunk=timedelta(days=1)):
                wh.load(LoadBatch(frames=frames, window=chunk))
        out["simulate_and_load_s"] = round(time.perf_counter() - started, 1)
        print(f"simulator month loaded in {out['simulate_and_load_s']}s", flush=True)
        with Warehouse.open(path, read_only=True) as wh:
            # quota replay on the simulator's Kueue demand: fit on all but the last week
            inputs = quota_inputs_from_warehouse(wh, timedelta(days=days))
            cut = window.end - timedelta(days=7)
            train = replace(inputs, history=inputs.history.filter(pl.col("ts") < cut))
            test = inputs.history.filter(pl.col("ts") >= cut)
            plan = plan_quota(train, QuotaOptions(time_limit_s=30, replay_history=test), SETTINGS, NOW)
            out["quota"] = quota_figures(plan) | {"solver_s": plan.solver.wall_s,
                                                  "status": plan.solver.status}
            print(f"simulator quota: {out['quota']['pending_gpu_minutes']}", flush=True)
            # right-sizing + MIG packing vs whole-GPU allocation of the same workloads
            started = time.perf_counter()
            demand = rightsized_demand(wh, window, SETTINGS)
            out["rightsizing"] = rightsizing(demand)
            out["rightsizing"]["analytics_s"] = round(time.perf_counter() - started, 1)
            print(f"right-sizing: {out['rightsizing']}", flush=True)
    return out


def rightsizing(demand: pl.DataFrame) -> dict[str, Any]:
    """Pack the right-sized peak demand on an empty fleet large enough for whole-GPU allocation."""
    per_model: dict[str, dict[str, int]] = {}
    for r in demand.iter_rows(named=True):
        per_model.setdefault(r["model"], {})[r["profile"]] = int(r["peak_count"])
    whole_gpus = {m: sum(v.values()) for m, v in per_model.items()}
    nodes = []
    for m, n in sorted(whole_gpus.items()):
        for k in range(-(-n // 8)):
            size = min(8, n - 8 * k)
            nodes.append(Node(name=f"{m}-{k}", gpus=tuple(
                Gpu(node=f"{m}-{k}", index=i, model=m, config=None) for i in range(size))))
    models = tuple(
        ModelDemand(m, {p: n for p, n in v.items() if p != "whole"}, v.get("whole", 0))
        for m, v in sorted(per_model.items())
    )
    plan = plan_mig(Fleet(tuple(nodes)), Demand(models), MigOptions(time_limit_s=30), SETTINGS, NOW)
    packed = int(plan.effect.gpus_used_after or 0)
    total = sum(whole_gpus.values())
    return {
        "demand": {m: v for m, v in sorted(per_model.items())},
        "gpus_whole_allocation": total, "gpus_rightsized_mig_packing": packed,
        "slice_lower_bound": plan.effect.slice_lower_bound,
        "fewer_gpus": round(1 - packed / total, 4) if total else None,
        "goal_fewer": 0.25, "goal_met": bool(total) and 1 - packed / total >= 0.25,
        "solver_status": plan.solver.status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--sim-gpus", type=int, default=64)
    parser.add_argument("--sim-days", type=int, default=28)
    parser.add_argument("--skip-simulator", action="store_true")
    args = parser.parse_args()
    sizes = [(200, 5.0), (1000, 5.0)] if args.quick else [(1000, 5.0), (10_000, 30.0)]
    results: dict[str, Any] = {"mig": [mig_case(n, limit) for n, limit in sizes]}
    # the lower-bound check, with a 30 s limit: a fresh fleet's change-minimal stage is the
    # hardest to prove (a perfect packing leaves little room), so its time is reported, not a goal
    results["mig_fresh_fleet"] = [mig_case(n, 30.0, fresh=True) for n, _ in sizes]
    results["quota_synthetic"] = (
        quota_case(10, 3, 3, days=14) if args.quick else quota_case(50, 10, 10)
    )
    if not args.skip_simulator:
        results["simulator"] = simulator_month(args.sim_gpus if not args.quick else 64,
                                               args.sim_days if not args.quick else 8)
    results["peak_rss_mib"] = round(peak_rss_mib(), 1)
    results["notes"] = [
        "Solver times are CP-SAT wall time with 2 workers on a shared 2-core machine; plan_total_s "
        "adds grouping, assignment, validation of every layout and the FF/FFD baselines.",
        "Quota stage 1 (expected unmet) is solved by exact marginal analysis; CP-SAT solves "
        "stages 2-3 inside the stage-1 optima (tests check both against brute force).",
        "The quota replay is a fluid model; with unlimited cohort borrowing it is work-conserving, "
        "so nominal quotas cannot change the cohort's total pending time (see "
        "fewer_pending_vs_current_with_borrowing); the gain is against static hard quotas.",
    ]
    write_result("optimizer", results)


if __name__ == "__main__":
    main()
