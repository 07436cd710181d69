"""`gpuledger refresh-serving` at fleet scale (issue 34): wall, CPU and peak RSS, today's tree
beside this one, and where the time goes (docs/decisions/0222).

Run: `python -m bench.bench_scale [--gpus 256] [--period 2026-10] [--baseline-ref REF]
[--cache DIR] [--bounded 1GiB ...] [--baseline-again] [--profile] [--only increment
[--increment-bound 4GiB]]`; writes
bench/results/scale.json (`--name` for another file).

- The warehouse is the demo's (`gpuledger demo`'s fleet, month, seed and 1-minute samples,
  simulated, loaded and rolled up by the demo's own `load_and_rollup`), built once into `--cache`
  (kept, so a rerun measures without rebuilding; its path and size are in the result).
- Each run is `python -m gpuledger refresh-serving --force -o json` of a tree on its own copy of
  that file (the command writes the serving store beside it), one after the other (2 shared
  cores: side by side would halve each), as a child reaped with `os.wait4`: wall seconds,
  user + system CPU seconds, the child's peak RSS (`ru_maxrss`), and the command's own
  per-result seconds (`results_s`). Runs: the baseline tree (`git archive` of
  `--baseline-ref`), this tree, this tree under each `--bounded` `warehouse.memory_limit`, and
  with `--baseline-again` the baseline once more, last (how far two runs of one tree differ).
- Every stored result of each run is compared with the baseline's: exactly equal, or the
  largest relative difference of two numbers at the same place and how many other places
  differ (summed floats move in their last bit with DuckDB's thread order). The serving stores
  are kept in `--cache`/stores for a closer look.
- `--profile`: this tree's refresh under cProfile in a child: per result its seconds, the peak
  RSS after it and the RSS it left; the top functions by cumulative and own time.
The load average before and after each run is recorded: on a shared machine wall seconds
drift with it; CPU seconds and peak RSS are the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import difference, gpuledger_child, load_average, unpack_tree, write_result

ROOT = Path(__file__).resolve().parent.parent
DAY_CHUNKS_UP_TO = 2_000
"""GPUs up to which the month is built a day at a time as the demo builds it; above, an hour at
a time (a 10,000-GPU day's frames are ~4.6 GB; the simulator needed 16-19 GB before its first
day), then rolled up: the same rows (the simulator is chunk-invariant), slower to build."""


def build(path: Path, gpus: int, period: str, seed: int = 7) -> dict[str, Any]:
    """The demo's warehouse at `path` (simulate, load, roll up, as `gpuledger demo` does)."""
    from gpuledger.commands._demo_pipeline import demo_fleet
    from gpuledger.core.config import Settings
    from gpuledger.core.period import Period
    from gpuledger.pipeline import load_and_rollup, load_simulation, rollup
    from gpuledger.simulator.dra_fleet import DraFleet
    from gpuledger.simulator.engine import Simulation
    from gpuledger.warehouse import Warehouse

    settings = Settings()
    window = Period.exact(period).window
    sim = Simulation(demo_fleet(gpus), window, seed=seed, idle_threshold=settings.idle.threshold,
                     idle_min_minutes=settings.idle.min_minutes)
    started = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    with Warehouse.open(path) as wh:
        if gpus <= DAY_CHUNKS_UP_TO:
            rows, chunk = load_and_rollup(wh, sim, settings, dra=DraFleet(window)), "day, overlapped"
        else:
            rows = load_simulation(wh, sim, dra=DraFleet(window), chunk=timedelta(hours=1))
            rows, chunk = rows + rollup(wh, window, settings), "hour, then the roll-up"
        samples = wh.count("gpu_samples")
    return {"rows": rows, "gpu_samples": samples, "chunk": chunk,
            "build_s": round(time.perf_counter() - started, 1)}


def measure(tree: Path, source: Path, work: Path, memory_limit: str | None = None) -> dict[str, Any]:
    """`refresh-serving --force` of `tree` on a copy of `source` in `work`: wall, CPU, peak RSS;
    with `memory_limit`, under a settings file that sets `warehouse.memory_limit` to it."""
    figures = gpuledger_child(tree, source, work, ["refresh-serving", "--force", "-o", "json"], memory_limit)
    text = (work / "stdout").read_text()
    try:
        document = json.loads(text)
    except ValueError:
        document = {"stdout_tail": text[-400:], "stderr_tail": (work / "stderr").read_text()[-800:]}
    return {**figures, "serving_store": str(work / "w.serving.duckdb"), "output": document}


EARLIER_BY_HOUR = ("gpu_sample_values", "token_samples", "queue_samples", "card_hours_hourly", "allocations")
"""What a collect round adds, removed for the refresh an hour earlier: the hour's samples, its
queue samples, roll-up hours and allocations starting in it (and the last day's daily roll-up,
which the round rewrites), so the increment publishes what a real one does (the serving
store's changed days, decision 0266), not only the day parts' new inputs."""


def increment(source: Path, work: Path, memory_limit: str | None = None, tree: Path = ROOT) -> dict[str, Any]:
    """`tree`'s refresh one hour later (issue 34 item 1, decision 0248): `refresh-serving
    --force` on a copy of `source` without the month's last hour (`EARLIER_BY_HOUR`; the day
    parts filled: every day read), then on `source` itself in the same folder, the parts kept
    (only the last day's inputs changed: the per-minute advice reads that day alone); both
    under `warehouse.memory_limit` `memory_limit` where given."""
    work.mkdir(parents=True, exist_ok=True)
    earlier = work.parent / f"{work.name}-earlier.duckdb"
    hour_earlier(source, earlier)
    first = measure(tree, earlier, work, memory_limit)
    earlier.unlink()
    return {"hour_earlier": first, **measure(tree, source, work, memory_limit), "memory_limit": memory_limit}


def hour_earlier(source: Path, into: Path) -> None:
    """A copy of the warehouse `source` at `into` as it was before its last collect round
    (`remove_last_hour`). Also what `bench/increment_ab.sh` starts each tree from."""
    shutil.copyfile(source, into)
    remove_last_hour(into)


def remove_last_hour(path: Path) -> None:
    """The warehouse at `path`, in place, as it was before its last collect round: the month's
    last hour removed (`EARLIER_BY_HOUR`), the last day's daily roll-up rewritten from the hourly
    rows left (as the round's load rewrites it: `daily_rollup.refresh_days`; deleting it billed
    the hour-earlier refresh without its last day) and every day fingerprint of that day rebuilt
    (as a load keeps them: the samples' v18, the roll-ups', allocations' and queue samples' v19)."""
    import duckdb

    from gpuledger.core.window import DAY, Window
    from gpuledger.warehouse.daily_rollup import refresh_days
    from gpuledger.warehouse.sample_fingerprints import ALL, rebuild

    con = duckdb.connect(str(path))
    try:
        con.execute("SET TimeZone = 'UTC'")
        last = con.execute("SELECT max(ts) FROM gpu_sample_values").fetchall()[0][0]
        [(day, last_day)] = con.execute("SELECT date_trunc('day', ?::TIMESTAMPTZ - INTERVAL 1 HOUR), "
                                        "date_trunc('day', ?::TIMESTAMPTZ)", [last, last]).fetchall()
        con.execute("BEGIN")
        for table in EARLIER_BY_HOUR:
            con.execute(f"DELETE FROM {table} WHERE ts > ? - INTERVAL 1 HOUR", [last])
        refresh_days(con, Window(day, last_day + DAY))  # the days of the hour removed and the hour before it
        tables = {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for kind in ALL:
            if kind.table in tables:
                rebuild(con, kind, since=day.date())
        con.execute("COMMIT")
    finally:
        con.close()


def stored_results(store: Path) -> dict[str, Any]:
    """(name period) → the stored result as data: a frame's rows or an advice kind's JSON."""
    import duckdb
    import polars as pl

    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute("SELECT name, period, payload FROM serving_results ORDER BY 1, 2").fetchall()
    finally:
        con.close()
    out: dict[str, Any] = {}
    for name, period, payload in rows:
        try:
            out[f"{name} {period}"] = pl.read_ipc(bytes(payload)).rows()
        except Exception:
            out[f"{name} {period}"] = json.loads(bytes(payload))
    return out


def compare(a: Path, b: Path) -> dict[str, Any]:
    """Each stored result of two serving stores: exactly equal, or how far apart."""
    left, right = stored_results(a), stored_results(b)
    out: dict[str, Any] = {}
    for key in sorted(set(left) | set(right)):
        rel, other = difference(left.get(key), right.get(key))
        out[key] = {"exact": left.get(key) == right.get(key), "max_rel_diff": rel, "other_differences": other}
    return out


def profile_child(source: Path, work: Path, out: Path) -> None:
    """In this process: `refresh_serving` under cProfile, each result's seconds, the peak RSS
    after it and the RSS it left (psutil), the top functions by cumulative and own time."""
    import cProfile
    import pstats
    import resource

    import psutil

    from gpuledger.core.config import Settings
    from gpuledger.dashboards import serving_results
    from gpuledger.warehouse import Warehouse

    work.mkdir(parents=True, exist_ok=True)
    copy = work / "w.duckdb"
    shutil.copyfile(source, copy)
    trace: list[dict[str, Any]] = []
    real = serving_results.compute

    def traced(*args: Any, **kwargs: Any) -> bytes:
        started = time.perf_counter()
        payload = real(*args, **kwargs)
        trace.append({"result": args[2], "s": round(time.perf_counter() - started, 1),
                      "peak_rss_mib_after": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                      "rss_mib_after": round(psutil.Process().memory_info().rss / 2**20)})
        return payload

    serving_results.compute = traced
    profiler = cProfile.Profile()
    with Warehouse.open(copy, read_only=True) as wh:
        profiler.enable()
        serving_results.refresh_serving(wh, Settings())
        profiler.disable()
    stats = pstats.Stats(profiler)
    top: dict[str, list[dict[str, Any]]] = {}
    for key, field in (("by_cumulative", 3), ("by_own_time", 2)):
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][field], reverse=True)[:25]  # type: ignore[attr-defined]
        top[key] = [{"function": f"{Path(f).name}:{line} {fn}", "calls": cc, "own_s": round(tt, 2),
                     "cumulative_s": round(ct, 2)} for (f, line, fn), (cc, _, tt, ct, _) in rows]
    out.write_text(json.dumps({"results": trace, **top}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--period", default="2026-10")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "bench-scale")
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--name", default="scale", help="bench/results/<name>.json")
    parser.add_argument("--profile", action="store_true", help="also profile this tree's refresh")
    parser.add_argument("--bounded", action="append", default=[], metavar="SIZE",
                        help="also run this tree with warehouse.memory_limit SIZE (repeatable)")
    parser.add_argument("--baseline-again", action="store_true",
                        help="run the baseline a second time, last: how far two runs of one tree differ")
    parser.add_argument("--only", choices=("baseline", "ours", "profile", "bounded", "increment",
                                           "baseline increment"),
                        action="append",
                        help="run only these parts (repeatable; default: baseline and ours; "
                        "bounded: only the --bounded runs; increment: this tree an hour earlier, "
                        "then now with the day parts kept; baseline increment: the baseline's)")
    parser.add_argument("--increment-bound", metavar="SIZE",
                        help="run the increment part with warehouse.memory_limit SIZE")
    parser.add_argument("--profile-child", nargs=2, type=Path, metavar=("WAREHOUSE", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile_child:
        source, out = args.profile_child
        profile_child(source, out.parent / "profile-work", out)
        return
    path = args.cache / f"demo-{args.gpus}-{args.period}.duckdb"
    built = None
    if not path.exists():
        built = build(path, args.gpus, args.period)
        print(json.dumps(built))
    if args.build_only:
        return
    parts = [*(p for p in (args.only or ["baseline", "ours"]) if p != "bounded"),
             *(f"ours at {size}" for size in args.bounded),
             *(["baseline again"] if args.baseline_again else []),
             *(["profile"] if args.profile and "profile" not in (args.only or []) else [])]
    ref = subprocess.run(["git", "rev-parse", "--short", args.baseline_ref], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    figures: dict[str, Any] = {"gpus": args.gpus, "period": args.period, "warehouse": str(path),
                               "warehouse_mib": round(path.stat().st_size / 2**20, 1), "built": built,
                               "baseline_ref": ref, "command": "gpuledger refresh-serving --force -o json",
                               "runs_in_order": parts, "load_average_1_5_15": {"before": load_average()}}
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.cache) as tmp:
        runs: dict[str, Any] = {}
        for part in parts:
            if part == "profile":
                out = Path(tmp) / "profile.json"
                started = time.perf_counter()
                child = [sys.executable, "-m", "bench.bench_scale", "--profile-child", str(path), str(out)]
                subprocess.run(child, cwd=ROOT, check=True)
                figures["profile"] = {"wall_s": round(time.perf_counter() - started, 1),
                                      **json.loads(out.read_text())}
            elif part == "increment":
                runs[part] = increment(path, Path(tmp) / part, args.increment_bound)
            else:
                baseline_tree = Path(tmp) / "tree"
                if part.startswith("baseline") and not baseline_tree.exists():
                    unpack_tree(ref, baseline_tree)
                tree = baseline_tree if part.startswith("baseline") else ROOT
                work = Path(tmp) / part.replace(" ", "-")
                if part == "baseline increment":
                    runs[part] = increment(path, work, args.increment_bound, tree)
                else:
                    bound = part.removeprefix("ours at ") if part.startswith("ours at ") else None
                    runs[part] = measure(tree, path, work, bound)
            figures["load_average_1_5_15"][f"after {part}"] = load_average()
        for against, name in (("ours", "increment_against_ours"),
                              ("baseline increment", "increment_against_baseline_increment")):
            if runs.get(against, {}).get("rc") == 0 and runs.get("increment", {}).get("rc") == 0:
                same = compare(Path(runs[against]["serving_store"]), Path(runs["increment"]["serving_store"]))
                figures[name] = {
                    "results": len(same), "exact": [k for k, v in same.items() if v["exact"]],
                    "not_exact": {k: v for k, v in same.items() if not v["exact"]}}
        if "baseline" in runs:
            base = runs["baseline"]
            for name, run in runs.items():
                if name == "baseline" or run["rc"] != 0:
                    continue
                same = compare(Path(base["serving_store"]), Path(run["serving_store"]))
                figures.setdefault("against_baseline", {})[name] = {
                    "results": len(same), "exact": [k for k, v in same.items() if v["exact"]],
                    "not_exact": {k: v for k, v in same.items() if not v["exact"]},
                    "speedup": round(base["wall_s"] / run["wall_s"], 2),
                    "rss_ratio": round(run["peak_rss_mib"] / base["peak_rss_mib"], 2)}
        for name, run in runs.items():  # kept for a closer look (the folder goes)
            kept = args.cache / "stores" / f"{name.replace(' ', '-')}.serving.duckdb"
            kept.parent.mkdir(exist_ok=True)
            if Path(run["serving_store"]).exists():
                shutil.copyfile(run["serving_store"], kept)
                run["serving_store"] = str(kept)
        figures.update(runs)
    write_result(args.name, figures)


if __name__ == "__main__":
    main()
