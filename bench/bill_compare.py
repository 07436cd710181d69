"""Scale and comparison parts of `bench.bench_bill`: the big fleet, the GROUP BY floor, the
code before decisions 0132/0133 and the differential check of its lines, growth 1k -> 10k."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2026, 11, 1, tzinfo=UTC)


def window_of_days(days: int) -> Any:
    from gpuledger.core.window import Window

    return Window(START, START + timedelta(days=days))


FLOORS = {
    "namespace": "SELECT namespace, sum(card_hours) AS card_hours, sum(idle_card_hours) AS idle "
                 "FROM card_hours_hourly WHERE ts >= $start AND ts < $end GROUP BY namespace",
    "namespace_daily": "SELECT namespace, sum(card_hours) AS card_hours, sum(idle_card_hours) AS idle "
                       "FROM card_hours_daily WHERE ts >= $start AND ts < $end GROUP BY namespace",
    "device_grain": "SELECT epoch_us(ts) // 86400000000 AS day_no, uuid, gpu_i_id, vgpu, profile, namespace, "
                    "pod, node, model, pool, sharing_mode, queue, sum(card_hours) AS card_hours "
                    "FROM card_hours_hourly WHERE ts >= $start AND ts < $end GROUP BY ALL",
    "device_grain_daily": "SELECT epoch_us(ts) // 86400000000 AS day_no, uuid, gpu_i_id, vgpu, profile, "
                          "namespace, pod, node, model, pool, sharing_mode, queue, "
                          "sum(card_hours) AS card_hours FROM card_hours_daily "
                          "WHERE ts >= $start AND ts < $end GROUP BY ALL",
}
"""The floors: one bare `GROUP BY` over the hourly roll-up's rows by namespace (the issue's
floor), the same over the daily roll-up's rows, and the device grain's own floors: the rows it
reads grouped into the day x device x holder rows it returns, from the hourly roll-up (the rows
today's tree reads) and from the daily one (the rows it reads since 0236)."""


def phase_floor(cache: Path, file: str, days: int, kind: str = "namespace") -> dict[str, Any]:
    """The floor of a bill from roll-ups (`FLOORS[kind]`), twice like the bill."""
    from gpuledger.warehouse import Warehouse

    window = window_of_days(days)
    times, cpu = [], []
    with Warehouse.open(cache / file, read_only=True) as wh:
        for _ in range(2):
            t, c = time.perf_counter(), time.process_time()
            rows = wh.query(FLOORS[kind], {"start": window.start, "end": window.end})
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    return {"seconds": round(times[0], 3), "warm_s": round(times[1], 3), "cpu_s": round(cpu[0], 3),
            "warm_cpu_s": round(cpu[1], 3), "groups": rows.height,
            "card_hours": round(float(rows["card_hours"].sum()), 3), "floor": kind}


def schema_copy(cache: Path, file: str, tree: Path) -> str:
    """`file` as the code of `tree` reads it: the same rows in a copy stepped back to that
    code's schema version (the daily roll-up of v016 dropped), so the baseline bills the same
    data in the same run; `file` itself when the versions match."""
    import shutil

    import duckdb

    version = subprocess.run(
        [sys.executable, "-c", "from gpuledger.warehouse.schema import LATEST; print(LATEST)"],
        capture_output=True, text=True, check=True, cwd=tree,
    ).stdout.strip()
    con = duckdb.connect(str(cache / file), read_only=True)
    ours = con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0]
    con.close()
    if int(version) >= int(ours):
        return file
    copy = f"{Path(file).stem}-v{version}.duckdb"
    shutil.copyfile(cache / file, cache / copy)
    con = duckdb.connect(str(cache / copy))
    con.execute("DROP TABLE IF EXISTS card_hours_daily")
    con.execute("DELETE FROM schema_version WHERE version > ?", [int(version)])
    con.execute("CHECKPOINT")
    con.close()
    return copy


def lines_diff(after: Path, before: Path) -> dict[str, Any]:
    """The differential check: the lines of two runs on the same data, money to the cent."""
    import polars as pl

    from gpuledger.analytics.billing.lines import HOURS, LINE_VALUES

    a, b = pl.read_parquet(after), pl.read_parquet(before)
    money = [c for c in LINE_VALUES if c not in HOURS]
    keys = [c for c in a.columns if c not in (*LINE_VALUES, *HOURS, "unpriced")]
    same_rows = a.height == b.height and a.select(keys).equals(b.select(keys))
    cents = same_rows and all(
        ((a[c] * 100).round() == (b[c] * 100).round()).all() for c in money
    )
    diffs: list[Any] = [(a[c] - b[c]).abs().max() for c in HOURS] if same_rows else []
    hours = max(float(d or 0.0) for d in diffs) if diffs else None
    return {"lines": a.height, "same_lines": same_rows, "money_equal_to_the_cent": cents,
            "hours_max_abs_diff": hours}


def compute_team_totals(bill: Any) -> list[dict[str, Any]]:
    import polars as pl

    return bill.lines.group_by("team").agg(pl.col("cost").sum().round(2)).sort("team").to_dicts()


def phase_big(cache: Path, gpus: int, big: int) -> dict[str, Any]:
    from gpuledger.core.frames import CARD_HOURS_HOURLY, GPUS
    from gpuledger.warehouse import Warehouse
    from gpuledger.warehouse.daily_rollup import refresh_days

    src = cache / "fleet.duckdb"
    path = cache / "big.duckdb"
    path.unlink(missing_ok=True)
    t = time.perf_counter()
    copies = max(1, big // gpus)
    with Warehouse.open(path) as wh:
        wh.con.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
        gcols = ", ".join(GPUS.column_names)
        hcols = ", ".join(CARD_HOURS_HOURLY.column_names)
        for k in range(copies):
            suffix = f"'-c{k}'"
            g_sel = gcols.replace("uuid,", f"uuid || {suffix},", 1).replace("node,", f"node || {suffix},", 1)
            h_sel = hcols.replace("uuid,", f"uuid || {suffix},", 1).replace("node,", f"node || {suffix},", 1)
            wh.con.execute(f"INSERT INTO gpus ({gcols}) SELECT {g_sel} FROM src.gpus")
            wh.con.execute(
                f"INSERT INTO card_hours_hourly ({hcols}) SELECT {h_sel} FROM src.card_hours_hourly"
            )
            wh.con.execute(
                f"INSERT INTO mig_instances SELECT uuid || {suffix}, gpu_i_id, profile, start_ts, end_ts "
                "FROM src.mig_instances"
            )
        for table in ("namespaces", "pods", "watermarks", "rollup_hours", "rule_sets"):
            wh.con.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
        wh.con.execute("DETACH src")
        refresh_days(wh.con, window_of_days(366))  # the day rows of the copied hours (v016)
        rows = int(wh.scalar("SELECT count(*) FROM card_hours_hourly"))
        cards = int(wh.scalar("SELECT count(*) FROM gpus"))
    return {"gpus": cards, "rollup_rows": rows, "build_s": round(time.perf_counter() - t, 1)}


def before_tree(cache: Path, ref: str) -> Path:
    """The product code of `ref` (no bench/ nor tools/, which come from this checkout)."""
    tree = cache / f"before-{ref}"
    if not (tree / "gpuledger").exists():
        tree.mkdir(parents=True, exist_ok=True)
        stages = ["gpuledger", "core", "collectors", "warehouse", "simulator", "analytics", "optimizer",
                  "actuator", "dashboards", "reports"]
        archive = subprocess.run(["git", "archive", ref, "--", *stages], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def growth(out: dict[str, Any]) -> dict[str, Any]:
    """How each monthly figure grows from the small fleet to the big one (warm and CPU time)."""
    pairs = {
        "lines_grain": "monthly_bill_from_rollup_lines_grain",
        "device_grain": "monthly_bill_from_rollup",
        "floor_group_by": "monthly_floor_group_by",
        "lines_grain_before": "monthly_bill_from_rollup_lines_grain_before",
        "device_grain_before": "monthly_bill_from_rollup_before",
    }
    grown: dict[str, Any] = {}
    for name, key in pairs.items():
        small, big = out.get(key), out.get(f"big_{key}")
        if small and big:
            grown[name] = {
                "small_warm_s": small["warm_s"], "big_warm_s": big["warm_s"],
                "warm_x": round(big["warm_s"] / small["warm_s"], 1),
                "cpu_x": round(big["warm_cpu_s"] / max(small["warm_cpu_s"], 1e-3), 1),
            }
    return grown


def over_floor(out: dict[str, Any]) -> dict[str, Any]:
    """Each 10,000-card monthly bill (ours and `--before`'s) over the issue's floor (the bare
    GROUP BY namespace over the hourly rows) and over the device grain's own floor: warm wall
    time and warm process CPU time (steadier on a loaded machine)."""
    floor, grain_floor = out.get("big_monthly_floor_group_by"), out.get("big_monthly_floor_device_grain")
    daily_floor = out.get("big_monthly_floor_device_grain_daily")
    ratios: dict[str, Any] = {}
    for name in ("big_monthly_bill_from_rollup", "big_monthly_bill_from_rollup_lines_grain",
                 "big_monthly_bill_from_rollup_before", "big_monthly_bill_from_rollup_lines_grain_before"):
        bill = out.get(name)
        if not bill or not floor:
            continue
        ratios[name] = {
            "warm_x_floor": round(bill["warm_s"] / floor["warm_s"], 1),
            "warm_cpu_x_floor": round(bill["warm_cpu_s"] / max(floor["warm_cpu_s"], 1e-3), 1),
        }
        for key, grain in (("device_grain_floor", grain_floor), ("device_grain_daily_floor", daily_floor)):
            if grain:
                ratios[name][f"warm_x_{key}"] = round(bill["warm_s"] / grain["warm_s"], 1)
                cpu = bill["warm_cpu_s"] / max(grain["warm_cpu_s"], 1e-3)
                ratios[name][f"warm_cpu_x_{key}"] = round(cpu, 1)
    return ratios
