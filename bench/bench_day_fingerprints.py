"""What the day fingerprints kept by their writers (v019, decision 0289) save a publish of the
serving store, and what keeping them costs a roll-up load.

    python -m bench.bench_day_fingerprints WAREHOUSE [--months 1 --months 12] [--rounds 4] [--name NAME]

WAREHOUSE: a month's warehouse (`bench_scale --build-only` makes the demo's at any size). A copy
is migrated first (v019 fills the fingerprints from the rows: timed). Then, for each history
length K in `--months` (the month's rows of the four tables the store keeps per day copied into
the K - 1 months before it, as a warehouse that keeps K months of roll-ups holds them, their
fingerprints rebuilt, the store published once, untimed), in one process on one file:

- publish: the month's last hour of roll-up (hourly rows and allocations) loaded as nothing,
  then back, by the product's load (its fingerprints kept), each load followed by a publish,
  the publishes alternating (ABBA) between reading the kept fingerprints and computing them from
  every row (the publish before v019: `serving_day_parts.day_fingerprints` without the kept
  tables). Every publish rewrites the last day of three tables, both ways alike;
- the fingerprint step alone, both ways, over the four tables (their fingerprints must be equal);
- load: the last hour's roll-up read back and loaded again unchanged, alternating with the
  fingerprints kept (`kept_current` in the load and in `daily_rollup.refresh_days`) and without
  (the load before v019). The kept fingerprints equal their rebuild after the publishes (checked;
  the loads without them leave them behind the rows, so they are rebuilt after those).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import load_average, write_result

ROLLED = ("card_hours_hourly", "allocations")
"""What one hour's roll-up load writes (the daily rows of its day follow in the load)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--months", type=int, action="append", help="history lengths (default 1 and 12)")
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds of each measure")
    parser.add_argument("--name", default="day_fingerprints")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.warehouse.parent) as work:
        copy = Path(work) / "w.duckdb"
        shutil.copyfile(args.warehouse, copy)
        figures = measure(copy, sorted(args.months or [1, 12]), args.rounds)
    write_result(args.name, {"warehouse": str(args.warehouse), **figures})


def measure(path: Path, months: list[int], rounds: int) -> dict[str, Any]:
    from gpuledger.warehouse import Warehouse

    load_before = load_average()
    started = time.perf_counter()
    Warehouse.open(path).close()  # migrated: v019 fills the fingerprints from the rows
    out: dict[str, Any] = {"migrate_s": round(time.perf_counter() - started, 2), "by_months": {}}
    held = 1
    for count in months:
        with Warehouse.open(path) as wh:
            _add_history(wh, held, count)
            held = count
            out["by_months"][count] = _measure_one(wh, rounds)
    out["load_average_before_after"] = [load_before, load_average()]
    out["command"] = "serving_store.publish after an hour's roll-up load; the load itself"
    return out


def _add_history(wh: Any, held: int, count: int) -> None:
    """The month's rows of each day-kept table copied into months `held` .. `count - 1` before
    it (31 days apart), their fingerprints rebuilt."""
    from gpuledger.warehouse.sample_fingerprints import BY_SOURCE, rebuild
    from gpuledger.warehouse.serving_day_parts import PARTITIONED

    first = wh.scalar("SELECT min(ts) FROM card_hours_hourly")
    for table in PARTITIONED:
        shifted = "ts - to_days($k * 31) AS ts" + (", end_ts - to_days($k * 31) AS end_ts"
                                                     if table == "allocations" else "")
        for k in range(held, count):
            wh.con.execute(f"INSERT INTO {table} SELECT * REPLACE ({shifted}) FROM {table} "
                           "WHERE ts >= $first AND ts < $first + INTERVAL 31 DAY", {"k": k, "first": first})
        rebuild(wh.con, BY_SOURCE[table])


def _measure_one(wh: Any, rounds: int) -> dict[str, Any]:
    from gpuledger.core.config import Settings
    from gpuledger.core.rules import SamplingRules
    from gpuledger.core.window import Window
    from gpuledger.warehouse import LoadBatch
    from gpuledger.warehouse.serving_day_parts import PARTITIONED, columns_of, day_fingerprints
    from gpuledger.warehouse.serving_store import publish

    margin = SamplingRules.of(Settings()).margin
    catalog = str(wh.scalar("SELECT current_database()"))
    last = wh.scalar("SELECT max(ts) FROM card_hours_hourly")
    hour = (last, last + timedelta(hours=1))
    rows = {t: wh.query(f"SELECT * FROM {t} WHERE ts >= ? AND ts < ?", list(hour)) for t in ROLLED}
    empty = {t: frame.clear() for t, frame in rows.items()}
    window = Window(*hour)
    publish(wh, margin=margin)  # the store holds the history: untimed
    ways = ("kept", "hashed")
    order = [ways[(i // 2 + i) % 2] for i in range(2 * rounds)]  # kept hashed hashed kept ...
    publish_s: dict[str, list[float]] = {w: [] for w in ways}
    rewritten: set[int] = set()
    for i, way in enumerate(order):
        wh.load(LoadBatch(empty if i % 2 == 0 else rows, window=window))
        with _fingerprints(way):
            started = time.perf_counter()
            stats = publish(wh, margin=margin)
            publish_s[way].append(time.perf_counter() - started)
        rewritten.add(stats.rewritten_parts)
    _assert_kept(wh)
    columns = {t: [n for n, _ in columns_of(wh.con, catalog, t)] for t in PARTITIONED}
    step_s: dict[str, list[float]] = {w: [] for w in ways}
    found: dict[str, list[dict[Any, str]]] = {w: [] for w in ways}
    for way in order:
        with _fingerprints(way):
            started = time.perf_counter()
            found[way] = [day_fingerprints(wh.con, catalog, t, columns[t]) for t in PARTITIONED]
            step_s[way].append(time.perf_counter() - started)
    assert found["kept"] == found["hashed"], "the kept fingerprints are the computed ones"
    load_s = _load_times(wh, LoadBatch(rows, window=window), order)
    return {
        "rows": {t: wh.count(t) for t in PARTITIONED},
        "publish_s": _summary(publish_s), "days_rewritten_per_publish": sorted(rewritten),
        "fingerprint_step_s": _summary(step_s),
        "load_s": _summary(load_s), "hour_rows": {t: f.height for t, f in rows.items()},
        "order": order,
    }


def _assert_kept(wh: Any) -> None:
    """The kept fingerprints equal their rebuild from the rows (every write so far kept them)."""
    from gpuledger.warehouse.sample_fingerprints import ROLLUPS, rebuild

    for kind in ROLLUPS:
        before = wh.query(f"SELECT * FROM {kind.table} ORDER BY ALL")
        rebuild(wh.con, kind)
        assert wh.query(f"SELECT * FROM {kind.table} ORDER BY ALL").equals(before), kind.table


def _load_times(wh: Any, batch: Any, order: list[str]) -> dict[str, list[float]]:
    """The unchanged hour loaded again, with the fingerprints kept and without. The loads
    without leave them behind the rows (each load sums the day's daily rows again, and DuckDB's
    parallel sums differ in the last bits from one run to the next, so the day's hash moves),
    so they are rebuilt after, unchecked."""
    from gpuledger.warehouse.sample_fingerprints import ROLLUPS, rebuild

    times: dict[str, list[float]] = {"kept": [], "without": []}
    for way in order:
        kept = way == "kept"
        with _kept_in_loads(kept):
            started = time.perf_counter()
            wh.load(batch)
            times["kept" if kept else "without"].append(time.perf_counter() - started)
    for kind in ROLLUPS:
        rebuild(wh.con, kind)
    return times


@contextmanager
def _fingerprints(way: str) -> Iterator[None]:
    """Publish reading the kept fingerprints ("kept") or computing them from the rows."""
    from gpuledger.warehouse import serving_day_parts

    kinds = serving_day_parts.BY_SOURCE
    if way == "hashed":
        serving_day_parts.BY_SOURCE = {}
    try:
        yield
    finally:
        serving_day_parts.BY_SOURCE = kinds


@contextmanager
def _kept_in_loads(kept: bool) -> Iterator[None]:
    """The loads with their fingerprints kept, or without (both writers: the load's and the
    daily roll-up's)."""
    from gpuledger.warehouse import daily_rollup, store

    saved: list[tuple[Any, Callable[..., Any]]] = [(store, store.kept_current),
                                                   (daily_rollup, daily_rollup.kept_current)]
    if not kept:
        for module, _ in saved:
            module.kept_current = lambda *_: nullcontext()
    try:
        yield
    finally:
        for module, real in saved:
            module.kept_current = real


def _summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {way: {"median": round(statistics.median(t), 4), "min": round(min(t), 4), "max": round(max(t), 4)}
            for way, t in times.items()}


if __name__ == "__main__":
    main()
