"""Benchmark: accuracy on field telemetry, the field fleet (every effect) beside its floor.

`python -m bench.bench_field [--gpus 40] [--hours 24] [--no-victoriametrics]` writes
`bench/results/field.json`.

1. Runs. The default fleet of `--gpus` cards over `--hours`, twice in the same run: with
   every field effect (`FieldEffects.all()`: jitter, missed scrapes, gaps, util-only nodes,
   exporter restarts, HA replicas, label renames, pod restarts, card replacement, MIG layout
   change, node churn, clock skew, NaN and negative samples) and with none (the floor: what
   the same path gets on a perfect one-minute grid). Each goes simulator → OpenMetrics →
   promtool backfill → real Prometheus → `collect_window` → `compute_bill`; the field fleet
   also through VictoriaMetrics. The path is the one tests/field runs (`tests.field.harness`).
2. Figures, per run: per-team relative error of card-hours and of allocated-but-idle
   card-hours against `Simulation.truth_by_team` (max and mean of the absolute error; idle over
   teams whose true idle is not zero, plus the largest idle billed to a team with none), the
   worst team for each, the collect report's sample counts by reason (dropped, merged, stored
   as NULL), noted series and empty chunks, and the seconds each run took.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import write_result
from gpuledger.core.window import Window
from tests.field.harness import FieldRun, effects, field_run

START = datetime(2026, 11, 1, tzinfo=UTC)


def _figures(run: FieldRun, seconds: float) -> dict[str, Any]:
    errors = run.team_errors()
    card = errors.select("team", pl.col("card_hours_err").abs().alias("e")).sort("e", descending=True)
    idle_teams = errors.filter(pl.col("idle_card_hours") > 0)
    idle = idle_teams.select("team", pl.col("idle_err").abs().alias("e")).sort("e", descending=True)
    phantom = errors.filter(pl.col("idle_card_hours") == 0)["idle_card_hours_bill"].fill_null(0.0)
    return {
        "engine": run.engine,
        "seconds": round(seconds, 1),
        "teams": errors.height,
        "card_hours_err_max": round(float(card["e"].max()), 6),  # type: ignore[arg-type]
        "card_hours_err_mean": round(float(card["e"].mean()), 6),  # type: ignore[arg-type]
        "card_hours_worst_team": card["team"][0],
        "idle_err_max": round(float(idle["e"].max()), 6),  # type: ignore[arg-type]
        "idle_err_mean": round(float(idle["e"].mean()), 6),  # type: ignore[arg-type]
        "idle_worst_team": idle["team"][0],
        "idle_billed_to_teams_without_idle_max": round(float(phantom.max() or 0.0), 6),  # type: ignore[arg-type]
        "held_card_hours": round(float(errors["card_hours_bill"].sum()), 4),
        "held_card_hours_truth": round(float(errors["card_hours"].sum()), 4),
        "fleet_card_hours": round(run.fleet_card_hours, 4),
        "samples_by_reason": dict(sorted(run.quality.by_reason().items())),
        "series_by_reason": dict(sorted(run.quality.series_by_reason().items())),
        "empty_chunks": len(run.quality.gaps),
        "per_team": errors.select(
            "team", pl.col("card_hours").round(4), pl.col("card_hours_bill").round(4),
            pl.col("idle_card_hours").round(4), pl.col("idle_card_hours_bill").round(4),
        ).to_dicts(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=40)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--no-victoriametrics", action="store_true")
    args = parser.parse_args()
    window = Window(START, START + timedelta(hours=args.hours))
    plan = [("field", "all", "prometheus"), ("floor", "none", "prometheus")]
    if not args.no_victoriametrics:
        plan.append(("field_victoriametrics", "all", "victoriametrics"))
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-field-") as tmp:
        for label, name, engine in plan:
            root = Path(tmp) / label
            root.mkdir()
            started = time.perf_counter()
            run = field_run(name, effects(name), engine, root, gpus=args.gpus, window=window)
            runs[label] = _figures(run, time.perf_counter() - started)
    write_result("field", {
        "fleet": {"gpus": args.gpus, "hours": args.hours, "start": START.isoformat(),
                  "effects": effects("all").as_dict()},
        "tolerances": {"card_hours_rel": 0.005, "idle_rel": 0.01},
        "runs": runs,
    })


if __name__ == "__main__":
    main()
