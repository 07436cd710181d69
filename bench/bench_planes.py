"""Benchmark: the per-plane error table of issue 29, every sharing plane through the real path.

`python -m bench.bench_planes [--hours 12] [--no-victoriametrics]` writes
`bench/results/planes.json`.

One run, per plane x source x engine, each through simulator (or corpus) → OpenMetrics → real
Prometheus (promtool backfill) or VictoriaMetrics (import API) → `collect_window` → the bill:
- whole cards, MIG, time-slicing, HAMi vGPU, and all of them together: the field fleet of
  `tests/field` (`field_run`; every `FieldEffects.all()` effect on) as the default fleet's pools
  of that sharing mode alone (`plane_fleet`) or the whole default fleet (`all`), from the API
  snapshot + Prometheus (`api`) and from Prometheus alone (`prometheus`). Truth: the
  simulator's intervals (`Simulation.truth_by_team`);
- DRA: the DRA pool with telemetry holes of `tests/field/dra_harness.py` (Prometheus only; a
  live API list every hour + Prometheus). Truth: the pool's plan (`DraPool.truth`);
- the corpus `tests/fixtures/planes/` (whole, MIG, time-slicing and MPS in both dcgm modes,
  label-poor), replayed as `tests/collectors/test_planes.py` replays it, Prometheus only (the
  corpus's API side is objects for the parser, no fleet). Truth: the hours its SOURCES.md
  states, written out below (`CORPUS_TRUTH`).
Figures per run: worst per-team card-hours error and worst idle error (teams with true idle;
plus the largest idle billed to a team with none), activity-unknown (DRA: the worst team's
miss over the truth's unknown total, the test's measure; elsewhere the truth has none, so the
billed hours and their share of held card-hours), the lines' cents against the fleet cost's
cents, what the bill names (warnings, unattributed namespaces, nodes without replicas), the
`unattributed` line's card-hours, seconds.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import write_result
from gpuledger.analytics.billing.money import to_cents
from gpuledger.core.window import Window
from tests.field.dra_harness import SOURCES as DRA_SOURCES
from tests.field.dra_harness import WINDOW as DRA_WINDOW
from tests.field.dra_harness import DraRun, dra_run
from tests.field.harness import HAMI_GPUS, SOURCES, WINDOW, FieldRun, effects, field_run

PLANES = {"whole": 16, "mig": 8, "timeslice": 8, "hami": HAMI_GPUS, "all": 40}
"""Simulated plane -> cards (nodes of 8; `all` is the default fleet, one node per pool)."""
NOT_TEAMS = ("unallocated", "sharing_discount")
CORPUS_TRUTH: dict[str, dict[str, float]] = {
    "whole": {"vision": 1.0, "unallocated": 1.0},
    "mig": {"search": 1 / 7, "nlp": 3 / 7, "unallocated": 2 / 7 + 1 / 7},
    "timeslice": {"a": 1 / 4 + 1 / 4 + 1 / 2, "b": 1 / 4, "unallocated": 1 / 4 + 1 / 2},
    "timeslice-vgpu": {"a": 1 / 4 + 1 / 4 + 1 / 2, "b": 1 / 4, "unallocated": 1 / 4 + 1 / 2},
    "label_poor": {"unattributed": 2.0, "unallocated": 2.0},
}
"""Per team, the card-hours SOURCES.md states for each corpus scenario's hour (the time-sliced
folder holds the A10G x4 and the MPS L4 x2 together)."""


def _r(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 6) + 0.0


def _cents(lines: pl.DataFrame, fleet_cost: float) -> dict[str, int]:
    return {"lines_cents": sum(to_cents(float(c)) for c in lines["cost"].to_list()),
            "fleet_cents": to_cents(fleet_cost)}


def _field(run: FieldRun, seconds: float) -> dict[str, Any]:
    errors = run.team_errors()
    card = errors.select("team", (pl.col("card_hours_err").abs() * 100).alias("e")).sort("e", descending=True)
    idle = errors.filter(pl.col("idle_card_hours") > 0).select(
        "team", (pl.col("idle_err").abs() * 100).alias("e")).sort("e", descending=True)
    phantom = errors.filter(pl.col("idle_card_hours") == 0)["idle_card_hours_bill"].fill_null(0.0)
    teams = run.lines.filter(~pl.col("team").is_in(NOT_TEAMS))
    held = float(teams["card_hours"].sum())
    unknown = float(teams["activity_unknown_card_hours"].fill_null(0.0).sum())
    unattributed = run.lines.filter(pl.col("team") == "unattributed")["card_hours"].sum()
    return {
        "seconds": round(seconds, 1), "gpus": run.gpu_count, "teams": errors.height,
        "card_hours_err_pct_max": _r(float(card["e"].max())), "card_hours_worst_team": card["team"][0],  # type: ignore[arg-type]
        "idle_err_pct_max": _r(float(idle["e"].max())) if idle.height else None,  # type: ignore[arg-type]
        "idle_worst_team": idle["team"][0] if idle.height else None,
        "idle_billed_to_teams_without_idle_max": _r(float(phantom.max() or 0.0)),  # type: ignore[arg-type]
        "activity_unknown_truth": 0.0, "activity_unknown_billed": _r(unknown),
        "activity_unknown_pct_of_held": _r(100 * unknown / held if held else 0.0),
        **_cents(run.lines, run.fleet_cost),
        "unattributed_card_hours": _r(float(unattributed)), "named": list(run.named),
        "held_card_hours": _r(held), "held_card_hours_truth": _r(float(run.truth["card_hours"].sum())),
    }


def _dra(run: DraRun, seconds: float) -> dict[str, Any]:
    errors = run.errors()
    total = float(errors["unknown_card_hours"].sum())
    card = errors.select("team", (pl.col("card_hours_err").abs() * 100).alias("e")).sort("e", descending=True)
    idle = errors.filter(pl.col("idle_card_hours") > 0).select(
        "team", (pl.col("idle_card_hours_err").abs() * 100).alias("e")).sort("e", descending=True)
    miss = errors.select("team", ((pl.col("activity_unknown_card_hours") - pl.col("unknown_card_hours")).abs()
                                  / total * 100).alias("e")).sort("e", descending=True)
    unattributed = run.lines.filter(pl.col("team") == "unattributed")["card_hours"].sum()
    return {
        "seconds": round(seconds, 1), "teams": errors.height,
        "card_hours_err_pct_max": _r(float(card["e"].max())), "card_hours_worst_team": card["team"][0],  # type: ignore[arg-type]
        "idle_err_pct_max": _r(float(idle["e"].max())), "idle_worst_team": idle["team"][0],  # type: ignore[arg-type]
        "activity_unknown_truth": _r(total),
        "activity_unknown_billed": _r(float(errors["activity_unknown_card_hours"].sum())),
        "activity_unknown_err_pct_of_truth_max": _r(float(miss["e"].max())),  # type: ignore[arg-type]
        **_cents(run.lines, run.fleet_cost),
        "unattributed_card_hours": _r(float(unattributed)), "named": list(run.warnings),
        "claim_rows_by_source": run.claim_sources, "bill_source": run.bill_source,
    }


def _corpus(engine: str, root: Path) -> dict[str, Any]:
    """Every corpus scenario through one engine, collected and billed per scenario's hour."""
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.collect_pipeline import collect_window
    from gpuledger.warehouse import Warehouse
    from tests.collectors.test_planes import SETTINGS as CORPUS_SETTINGS
    from tests.collectors.test_planes import openmetrics, window_of
    from tools.metrics_servers import ServerPool

    path = openmetrics(root / "planes.om")
    pool = ServerPool(root)
    out: dict[str, Any] = {}
    try:
        server = pool.prometheus(path) if engine == "prometheus" else pool.victoriametrics(path)
        for name, truth in CORPUS_TRUTH.items():
            began, window = time.perf_counter(), window_of(name)
            with Warehouse.open(root / f"{name}.duckdb") as wh:
                collect_window(wh, CORPUS_SETTINGS, server.url, window,
                               now=lambda w=window: w.end + timedelta(minutes=5))  # type: ignore[misc]
                bill = compute_bill(wh, window, CORPUS_SETTINGS)
            billed = {r["team"]: r["card_hours"] for r in bill.lines.iter_rows(named=True)}
            err = {t: 100 * abs(billed.get(t, 0.0) / h - 1) for t, h in truth.items()}
            worst = max(err, key=lambda t: err[t])
            idle = float(bill.lines.filter(~pl.col("team").is_in(NOT_TEAMS))["idle_card_hours"].sum())
            named = [*bill.warnings, *(f"unattributed namespace {n}" for n in bill.unattributed_namespaces),
                     *(f"replicas unknown on node {n}" for n in bill.replicas_unknown_nodes)]
            out[name] = {
                "seconds": round(time.perf_counter() - began, 1),
                "card_hours_err_pct_max": _r(err[worst]), "card_hours_worst_team": worst,
                "billed": {t: _r(h) for t, h in sorted(billed.items())},
                "truth": {t: _r(h) for t, h in sorted(truth.items())},
                "idle_billed": _r(idle), **_cents(bill.lines, float(bill.fleet_cost)),
                "named": named,
                "pools": sorted({str(p) for p in bill.unallocated["pool"].to_list()}),
            }
    finally:
        pool.stop_all()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=12)
    parser.add_argument("--no-victoriametrics", action="store_true")
    args = parser.parse_args()
    engines = ("prometheus",) if args.no_victoriametrics else ("prometheus", "victoriametrics")
    window = Window(WINDOW.start, WINDOW.start + timedelta(hours=args.hours))
    dra_window = Window(DRA_WINDOW.start, DRA_WINDOW.start + timedelta(hours=args.hours))
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-planes-") as tmp:
        for plane, gpus in PLANES.items():
            for source in SOURCES:
                for engine in engines:
                    root = Path(tmp) / f"{plane}-{source}-{engine}"
                    root.mkdir()
                    began = time.perf_counter()
                    run = field_run("all", effects("all"), engine, root, gpus=gpus, window=window,
                                    source=source, fleet="default" if plane == "all" else plane)
                    runs[f"{plane}/{source}/{engine}"] = _field(run, time.perf_counter() - began)
                    print(plane, source, engine, runs[f"{plane}/{source}/{engine}"]["seconds"], flush=True)
        for source in DRA_SOURCES:
            for engine in engines:
                root = Path(tmp) / f"dra-{source.replace('+', '-')}-{engine}"
                root.mkdir()
                began = time.perf_counter()
                runs[f"dra/{source}/{engine}"] = _dra(dra_run(source, engine, root, window=dra_window),
                                                      time.perf_counter() - began)
        corpus = {}
        for engine in engines:
            root = Path(tmp) / f"corpus-{engine}"
            root.mkdir()
            corpus[engine] = _corpus(engine, root)
    write_result("planes", {
        "window_hours": args.hours, "field_window": [window.start.isoformat(), window.end.isoformat()],
        "dra_window": [dra_window.start.isoformat(), dra_window.end.isoformat()],
        "effects": effects("all").as_dict(), "gpus": PLANES,
        "tolerances_pct": {"card_hours": 0.5, "idle": 1.0, "activity_unknown": 1.0},
        "runs": runs, "corpus": corpus,
    })


if __name__ == "__main__":
    main()
