"""Benchmark: DRA accuracy on a pool with telemetry holes, per source and engine (issue 29).

`python -m bench.bench_dra_field [--hours 12]` writes `bench/results/dra_field.json`.

The simulator's DRA pool (`simulator.dra_fleet`) with `DraField.holes()` (dcgm-exporter down two
hours on one node and 15 minutes on another, dynamic MIG devices created 5 minutes after their
claims, a pod pending on its prepared claim), written as dcgm-exporter and kube-state-metrics
write it, through real Prometheus and VictoriaMetrics, collected with the roll-up and billed by
the default bill: Prometheus only (claims rebuilt from the series) and a live API list every
hour plus Prometheus; the path tests/field/test_dra_accuracy.py runs (`tests.field.dra_harness`).
Figures per run: per-team card-hours, idle and activity-unknown card-hours, billed and true, with
their relative errors; `dra_claims` rows by source; the seconds the run took. The floor beside
it: what telemetry alone shows of each team's held card-hours (the issue's 17 %).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import write_result
from gpuledger.core.window import Window
from gpuledger.simulator.dra import CLAIMS, TEAMS, DraField, share
from gpuledger.simulator.dra_fleet import DraFleet
from tests.field.dra_harness import SOURCES, WINDOW, DraRun, dra_run


def _figures(run: DraRun, seconds: float) -> dict[str, Any]:
    rows = run.errors().to_dicts()
    teams = [{k: _number(v) for k, v in r.items()} for r in rows]
    return {"seconds": round(seconds, 1), "bill_source": run.bill_source,
            "claim_rows_by_source": run.claim_sources, "warnings": list(run.warnings), "per_team": teams}


def _number(value: Any) -> Any:
    """Rounded; a relative error over a zero truth (NaN) as null, which JSON has."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6) + 0.0
    return value


def _seen_share(window: Window) -> dict[str, float]:
    """Per team, the share of its held card-hours its series show (telemetry alone)."""
    fleet = DraFleet(window, DraField.holes())
    seen: dict[str, float] = {}
    for pool in fleet.pools:
        minutes = len(fleet.minutes(pool))
        for claim in CLAIMS:
            team = TEAMS[claim.namespace]
            shown = [m for m in pool.shown(claim) if m < minutes]
            seen[team] = seen.get(team, 0.0) + share(claim) * len(shown) / 60
    return {t: round(seen[t] / f["card_hours"], 4) for t, f in fleet.truth().items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=12)
    args = parser.parse_args()
    window = Window(WINDOW.start, WINDOW.start + timedelta(hours=args.hours))
    runs: dict[str, Any] = {}
    for source in SOURCES:
        for engine in ("prometheus", "victoriametrics"):
            with tempfile.TemporaryDirectory() as root:
                began = time.perf_counter()
                run = dra_run(source, engine, Path(root), window=window)
                runs[f"{source}/{engine}"] = _figures(run, time.perf_counter() - began)
    tolerances = {"card_hours_rel": 0.005, "idle_rel": 0.01, "unknown_rel": 0.01}
    path = write_result("dra_field", {"window": [window.start.isoformat(), window.end.isoformat()],
                                      "tolerances": tolerances,
                                      "telemetry_alone_share_of_held": _seen_share(window), "runs": runs})
    print(path)


if __name__ == "__main__":
    main()
