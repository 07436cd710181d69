"""Scale and comparison parts of `bench.bench_bill`: the big fleet, the GROUP BY floor, the
code before decisions 0132/0133 and the differential check of its lines, growth 1k -> 10k."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2026, 11, 1, tzinfo=UTC)


def window_of_days(days: int) -> Any:
    from gpuledger.core.window import Window

    return Window(START, START + timedelta(days=days))


def phase_floor(cache: Path, file: str, days: int) -> dict[str, Any]:
    """The floor of a bill from roll-ups: one `GROUP BY` over the same roll-up rows (by
    namespace, which names the team), twice like the bill."""
    from gpuledger.warehouse import Warehouse

    window = window_of_days(days)
    times, cpu = [], []
    with Warehouse.open(cache / file, read_only=True) as wh:
        for _ in range(2):
            t, c = time.perf_counter(), time.process_time()
            rows = wh.query(
                "SELECT namespace, sum(card_hours) AS card_hours, sum(idle_card_hours) AS idle "
                "FROM card_hours_hourly WHERE ts >= $start AND ts < $end GROUP BY namespace",
                {"start": window.start, "end": window.end},
            )
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    return {"seconds": round(times[0], 3), "warm_s": round(times[1], 3), "cpu_s": round(cpu[0], 3),
            "warm_cpu_s": round(cpu[1], 3), "groups": rows.height,
            "card_hours": round(float(rows["card_hours"].sum()), 3)}


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
        for table in ("namespaces", "pods", "watermarks"):
            wh.con.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
        wh.con.execute("DETACH src")
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
