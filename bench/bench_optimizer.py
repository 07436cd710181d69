"""Benchmark: the optimizer against its baselines, side by side in one run.

MIG (synthetic fleets: A100-80GB, H100-80GB, H200-141GB nodes of 8, random current layouts,
20% of instances busy, 1% of those pinned, 10% whole cards, demand at 80% of capacity):
1. 1,000 and 10,000 GPUs: solver time and status (goal: proven optimal in ≤ 5 s / ≤ 30 s),
   GPUs used vs the slice lower bound and vs first-fit / first-fit-decreasing on the same input;
   plus a fresh fleet (no busy or pinned pods) where the lower bound is attainable;
2. steady state: apply the plan, move the demand by up to ±3% per profile, plan again: share of
   GPUs changed (goal ≤ 5%).
Quota:
3. 50 teams × 10 flavors (500 series, seasonal synthetic demand with per-team drift, 35
   days): the plan's rolling-origin backtest (3 origins × 7 held-out days) against the static
   current quotas under contention (goal: ≥ 30% fewer pending GPU-minutes at equal capacity,
   no team worse by more than 5% of its demand), beside demand-proportional static quotas
   fitted on the same days; and a weekly re-plan (each week fitted on all history so far,
   adopted only when proposed) replayed week by week against the static quotas;
4. the simulator's month (`--sim-gpus` GPUs): the quota plan's backtest on its Kueue demand, and the
   right-sizing figure: GPUs needed after right-sizing (analytics) + MIG packing (this
   optimizer) vs whole-GPU allocation of the same workloads (goal ≥ 25% fewer).

Run: `python -m bench.bench_optimizer` (add `--quick` for a smoke run, `--quota-only` for 3).
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
from gpuledger.optimizer.mig.inputs import Demand, Fleet, Gpu, ModelDemand, Node
from gpuledger.optimizer.mig.planner import MigOptions, plan_mig
from gpuledger.optimizer.mig.synthetic import random_demand, random_fleet
from gpuledger.optimizer.plan.contract import MigChanges, Plan, QuotaChanges
from gpuledger.optimizer.quota.backtest import combine, rolling_splits
from gpuledger.optimizer.quota.fit import old_quotas
from gpuledger.optimizer.quota.guarantees import rise_shares
from gpuledger.optimizer.quota.inputs import QuotaInputs
from gpuledger.optimizer.quota.planner import QuotaOptions, plan_quota, proportional_quotas
from gpuledger.optimizer.quota.replay import ReplayResult, replay
from gpuledger.optimizer.quota.spec import Quota
from gpuledger.optimizer.quota.synthetic import synthetic_quota_inputs

NOW = datetime(2026, 11, 5, tzinfo=UTC)
SETTINGS = Settings()
QUOTA_START = datetime(2026, 10, 5, tzinfo=UTC)  # a Monday
DRIFT = 0.4


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


# 3. Quota, synthetic with drift -----------------------------------------------------------------
def drifting_inputs(teams: int, flavors: int, per_team: int, days: int) -> QuotaInputs:
    return synthetic_quota_inputs(teams, flavors, flavors_per_team=per_team, days=days,
                                  step=timedelta(minutes=15), start=QUOTA_START, seed=3, drift=DRIFT)


def quota_case(teams: int, flavors: int, per_team: int, days: int) -> dict[str, Any]:
    """The plan on the whole history, measured by its own rolling-origin backtest, beside the
    demand-proportional static quotas fitted on the same days and replayed on the same ones."""
    inputs = drifting_inputs(teams, flavors, per_team, days)
    started = time.perf_counter()
    plan = plan_quota(inputs, QuotaOptions(time_limit_s=60), SETTINGS, NOW)
    total = time.perf_counter() - started
    e = plan.evaluation
    assert e is not None
    splits, _ = rolling_splits(inputs, timedelta(days=7), 3, timedelta(days=7))
    static = combine([replay(inputs, old_quotas(inputs), borrowing=False, history=s.test) for s in splits])
    prop = combine([replay(inputs, proportional_quotas(s.train), borrowing=False, history=s.test)
                    for s in splits])
    spread = e.spread()
    figures: dict[str, Any] = {
        "teams": teams, "flavors": flavors, "flavors_per_team": per_team, "history_days": days,
        "drift": DRIFT, "series": sum(len(q.quotas) for q in inputs.queues),
        "headline": e.headline, "verdict": e.verdict,
        "origins": len(e.origins), "held_out_days": e.held_out_days,
        "pending_gpu_minutes_held_out": {
            "static_current_quotas": e.pending_before, "this_plan": e.pending_after,
            "proportional_to_mean_demand": round(prop.pending_gpu_minutes, 1),
            "in_sample_static": e.in_sample_pending_before, "in_sample_this_plan": e.in_sample_pending_after,
        },
        "fewer_pending_vs_static": _fewer(e.pending_after, e.pending_before),
        "fewer_pending_per_origin": [round(1 - o.pending_after / o.pending_before, 4)
                                     for o in e.origins if o.pending_before],
        "fewer_pending_spread": [round(spread[0], 4), round(spread[1], 4)] if spread else None,
        "fewer_pending_proportional_vs_static": _fewer(prop.pending_gpu_minutes, static.pending_gpu_minutes),
        "worst_team_rise_share": round(max(t.rise_share for t in e.teams), 4),
        "worst_team_rise_share_proportional": round(max(rise_shares(static, prop).values()), 4),
        "teams_worse": sum(t.rise_share > 0 for t in e.teams),
        "borrowed_gpu_hours": [e.borrowed_gpu_hours_before, e.borrowed_gpu_hours_after],
        "solver_status": plan.solver.status, "solver_s_final_fit": plan.solver.wall_s,
        "plan_total_s": round(total, 2),
    }
    figures |= _goals(figures["fewer_pending_vs_static"], figures["worst_team_rise_share"])
    print(f"quota {teams}x{flavors}: {e.headline}; worst team {figures['worst_team_rise_share']:+.1%}",
          flush=True)
    return figures


def weekly_replan(teams: int, flavors: int, per_team: int, days: int) -> dict[str, Any]:
    """Re-plan every week on all history so far (adopting a plan only when it is proposed), with
    the quotas in force as the pending baseline and the original static quotas as the fairness
    reference (a standing plan that drift has made unfair to a team is corrected, decision
    0119), and replay the next week under the adopted quotas and under the original static ones."""
    inputs = drifting_inputs(teams, flavors, per_team, days)
    static = old_quotas(inputs)
    current = inputs
    weeks: list[dict[str, Any]] = []
    pairs: list[tuple[ReplayResult, ReplayResult]] = []
    for week in range(1, days // 7):
        cut = QUOTA_START + timedelta(days=7 * week)
        train = replace(current, history=inputs.history.filter(pl.col("ts") < cut))
        test = inputs.history.filter((pl.col("ts") >= cut) & (pl.col("ts") < cut + timedelta(days=7)))
        if week > 1:  # a week of history is too short to test out of sample: keep the static quotas
            plan = plan_quota(train, QuotaOptions(time_limit_s=60, fairness_reference=static), SETTINGS, NOW)
            if plan.proposes_nothing is None:
                current = _adopt(current, plan)
            e = plan.evaluation
            weeks.append({"week": week, "verdict": e.verdict if e else None,
                          "fairness_correction": e.fairness_correction if e else False,
                          "standing_rise_share": e.standing_rise_share if e else None,
                          "plan_rise_share": e.plan_rise_share if e else None,
                          "reason": e.reason if e else None})
        pairs.append((replay(inputs, static, borrowing=False, history=test),
                      replay(inputs, old_quotas(current), borrowing=False, history=test)))
    before, after = combine([p[0] for p in pairs]), combine([p[1] for p in pairs])
    worst = _team_worst(inputs, before, after)
    out: dict[str, Any] = {
        "weeks_replayed": len(pairs), "replans": weeks,
        "pending_gpu_minutes": {"static": round(before.pending_gpu_minutes, 1),
                                "weekly_replan": round(after.pending_gpu_minutes, 1)},
        "fewer_pending_vs_static": _fewer(after.pending_gpu_minutes, before.pending_gpu_minutes),
        "worst_team_rise_share": round(worst, 4),
    }
    out |= _goals(out["fewer_pending_vs_static"], worst)
    print(f"weekly re-plan: {out['fewer_pending_vs_static']} fewer pending, worst team {worst:+.1%}",
          flush=True)
    return out


def _adopt(inputs: QuotaInputs, plan: Plan) -> QuotaInputs:
    """The inputs with the plan's quotas as the current ones (what applying it would leave)."""
    assert isinstance(plan.changes, QuotaChanges)
    new = {(c.cluster_queue, c.flavor, c.resource): Quota(c.new_nominal, c.new_borrowing_limit,
                                                          c.new_lending_limit) for c in plan.changes.quotas}
    queues = tuple(replace(q, quotas={k: new[(q.name, *k)] for k in q.quotas}) for q in inputs.queues)
    return replace(inputs, queues=queues)


def _team_worst(inputs: QuotaInputs, before: ReplayResult, after: ReplayResult) -> float:
    teams: dict[str, list[float]] = {}
    for q in inputs.queues:
        row = teams.setdefault(q.team or q.name, [0.0, 0.0, 0.0])
        row[0] += before.per_queue_pending.get(q.name, 0.0)
        row[1] += after.per_queue_pending.get(q.name, 0.0)
        row[2] += after.per_queue_demand.get(q.name, 0.0)
    return max((a - b) / d for b, a, d in teams.values() if d > 0)


def _fewer(after: float | None, before: float | None) -> float | None:
    return round(1 - after / before, 4) if before and after is not None else None


def _goals(fewer: float | None, worst: float) -> dict[str, Any]:
    return {"goal_fewer_pending": 0.30, "goal_worst_team_rise_share": 0.05,
            "goal_met": (fewer or 0) >= 0.30 and worst <= 0.05}


def quota_figures(plan: Plan) -> dict[str, Any]:
    """A plan's held-out figures (the simulator's month)."""
    e = plan.evaluation
    return {"headline": e.headline if e else None, "verdict": e.verdict if e else None,
            "pending_gpu_minutes_held_out": [plan.effect.pending_gpu_minutes_before,
                                             plan.effect.pending_gpu_minutes_after],
            "fewer_pending_vs_static": _fewer(plan.effect.pending_gpu_minutes_after,
                                              plan.effect.pending_gpu_minutes_before)}


# 4. The simulator's month ----------------------------------------------------------------------
def simulator_month(gpus: int, days: int) -> dict[str, Any]:
    from gpuledger.analytics.workloads.recommend import rightsized_demand
    from gpuledger.core.window import Window
    from gpuledger.optimizer.quota.inputs import quota_inputs_from_warehouse
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
            # the quota plan on the simulator's Kueue demand, measured by its own backtest
            inputs = quota_inputs_from_warehouse(wh, timedelta(days=days))
            plan = plan_quota(inputs, QuotaOptions(time_limit_s=30), SETTINGS, NOW)
            out["quota"] = quota_figures(plan) | {"solver_s": plan.solver.wall_s,
                                                  "status": plan.solver.status}
            print(f"simulator quota: {out['quota']['headline']}", flush=True)
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
    parser.add_argument("--quota-only", action="store_true",
                        help="only the quota cases 3, written to results/optimizer_quota.json")
    args = parser.parse_args()
    size = (10, 3, 3, 21) if args.quick else (50, 10, 10, 35)
    if args.quota_only:
        write_result("optimizer_quota", {
            "quota_synthetic_drift": quota_case(*size), "quota_weekly_replan": weekly_replan(*size),
            "peak_rss_mib": round(peak_rss_mib(), 1)})
        return
    sizes = [(200, 5.0), (1000, 5.0)] if args.quick else [(1000, 5.0), (10_000, 30.0)]
    results: dict[str, Any] = {"mig": [mig_case(n, limit) for n, limit in sizes]}
    # the lower-bound check, with a 30 s limit: a fresh fleet's change-minimal stage is the
    # hardest to prove (a perfect packing leaves little room), so its time is reported, not a goal
    results["mig_fresh_fleet"] = [mig_case(n, 30.0, fresh=True) for n, _ in sizes]
    results["quota_synthetic_drift"] = quota_case(*size)
    results["quota_weekly_replan"] = weekly_replan(*size)
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
        "so nominal quotas cannot change the cohort's total pending time; the gain is under "
        "contention (no borrowing), against the static current quotas, on held-out days only.",
        "Quota figures are out of sample: rolling origins, each fitted on its past and replayed "
        "on the next 7 days; a team's rise is its added pending time over its own demand.",
    ]
    write_result("optimizer", results)


if __name__ == "__main__":
    main()
