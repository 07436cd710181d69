"""The differential check of the sample pass on field data: Polars pass vs the SQL it replaced.

Run: `python -m bench.bench_sample_pass [--gpus 40] [--hours 12]`. The field harness of
`tests/field` (simulator in field mode with every effect of `FieldEffects.all()`: jitter,
missed scrapes, HA duplicates, NaN and negative values, exporter restarts, ...) → OpenMetrics →
real Prometheus and VictoriaMetrics → `collect_window` into a warehouse; then, on the stored
samples, `analytics.sampling.sweep` (decision 0122) against the frozen SQL pass
(`bench.sampling_sql_before`), for the whole window and for one hour in its middle: the hourly
frame, the allocations and the idle runs must have the same rows (every column bit for bit but
the two averages `active_ratio` / `active_mean`, within 1e-12: each engine sums in its own
order), both under the hole rule the SQL was written for (`card-next-scrape-v1`); the pass
under the current rule (decision 0168) is timed beside it. Writes
bench/results/sample_pass_field.json with row counts and the passes' seconds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

from bench import sampling_sql_before as before
from bench.common import write_result
from bench.sampling_params import params
from gpuledger.analytics.sampling import results, sweep
from gpuledger.core.config import Settings
from gpuledger.core.rules import HOLE_RULE_V1, SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from tests.field.harness import WINDOW, effects, field_run

KEYS = ["uuid", "gpu_i_id", "vgpu", "namespace", "pod"]
AVERAGES = {"active_ratio", "active_mean"}


def _equal(new: pl.DataFrame, old: pl.DataFrame, first: str) -> dict[str, Any]:
    new, old = new.sort([first, *KEYS], nulls_last=True), old.sort([first, *KEYS], nulls_last=True)
    assert new.schema == old.schema, (new.schema, old.schema)
    exact = [c for c in new.columns if c not in AVERAGES]
    assert_frame_equal(new.select(exact), old.select(exact), check_exact=True)
    floats = [c for c in new.columns if c in AVERAGES]
    assert_frame_equal(new.select(floats), old.select(floats), check_exact=False, rel_tol=1e-12, abs_tol=0)
    return {"rows": new.height, "equal": True}


def _pass(wh: Warehouse, window: Window, rules: SamplingRules) -> tuple[dict[str, pl.DataFrame], float]:
    t = time.perf_counter()
    pieces = sweep.run(wh, window, rules)
    frames = {"hourly": results.hourly(pieces), "allocations": results.allocations(pieces),
              "idle_runs": results.idle_pieces(pieces)}
    return frames, time.perf_counter() - t


def compare(wh: Warehouse, window: Window) -> dict[str, Any]:
    """New vs old on one window: rows compared, seconds of each. The SQL is frozen at the hole
    rule of its day, so the comparison runs the pass under that rule (`card-next-scrape-v1`);
    the pass under the current rule (decision 0168) is timed beside it, with the held hours it
    moves (a holder change inside a hole)."""
    current = SamplingRules.of(Settings())
    rules = replace(current, hole_rule=HOLE_RULE_V1)
    p = params(window, rules)
    new, new_s = _pass(wh, window, rules)
    now, now_s = _pass(wh, window, current)
    t = time.perf_counter()
    old = {"hourly": wh.query(before.HOURLY_SQL, p), "allocations": wh.query(before.ALLOCATIONS_SQL, p),
           "idle_runs": wh.query(before.IDLE_RUNS_SQL, p)}
    old_s = time.perf_counter() - t
    firsts = {"hourly": "hour", "allocations": "start_us", "idle_runs": "start_us"}
    rows = {name: _equal(new[name], old[name], firsts[name]) for name in new}
    per_holder = [f["hourly"].group_by(KEYS).agg(pl.col("held_hours").sum()) for f in (now, new)]
    diff = pl.col("held_hours").fill_null(0.0) - pl.col("held_hours_v1").fill_null(0.0)
    moved = per_holder[0].join(per_holder[1], on=KEYS, how="full", nulls_equal=True, suffix="_v1").select(
        diff.abs().sum())
    return {"frames": rows, "polars_pass_v1_s": round(new_s, 2), "polars_pass_s": round(now_s, 2),
            "held_hours_moved_by_hole_rule": round(float(moved.item()), 4),
            "sql_pass_three_statements_s": round(old_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=40)
    parser.add_argument("--hours", type=int, default=12)
    args = parser.parse_args()
    window = Window(WINDOW.start, WINDOW.start + timedelta(hours=args.hours))
    middle = window.start + timedelta(hours=args.hours // 2)
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sample-pass-") as tmp:
        for engine in ("prometheus", "victoriametrics"):
            root = Path(tmp) / engine
            root.mkdir()
            run = field_run("all", effects("all"), engine, root, gpus=args.gpus, window=window)
            with Warehouse.open(root / "w.duckdb", read_only=True) as wh:
                samples = wh.count("gpu_samples")
                runs[engine] = {"gpu_sample_rows": samples, "window": compare(wh, window),
                                "one_hour": compare(wh, Window(middle, middle + timedelta(hours=1))),
                                "ha_duplicates_read": int(run.reads["ha_duplicate"].sum())}
    write_result("sample_pass_field", {
        "fleet": {"gpus": args.gpus, "hours": args.hours, "effects": effects("all").as_dict()},
        "runs": runs,
    })


if __name__ == "__main__":
    main()
