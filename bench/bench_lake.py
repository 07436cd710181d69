"""Benchmark: the org bill over the lake, DuckDB (embedded) vs Spark (local mode), side by side.

`python -m bench.bench_lake [--gpus 1000] [--days 30] [--clusters 3,10] [--repeat 3]` writes
`bench/results/lake.json`.

1. Data. One day of the simulator's default fleet (`--gpus` cards: exclusive, MIG,
   time-sliced, vGPU and inference pools, 5-minute samples) is billed by `analytics.billing.bill` at
   the device grain: that day's priced detail is what a cluster publishes. Each cluster is that
   detail replayed for `--days` days, under its own card, node and pod names, at its own price
   level (money columns scaled), with its own redistribution policy (none / proportional /
   even in turn) and the same team names (teams roll up across clusters). Simulating and
   billing 30 days x 10 clusters would take hours here; the org bill's cost depends on the
   detail's volume and shape, which this keeps.
2. Publish. Each cluster's partition through `warehouse.lake.partition.publish_partition`
   (Parquet, manifest last) into a local lake; timed per cluster.
3. The org bill for the first 3 and for all 10 clusters, by cluster x team and by team x pool x
   day, on DuckDB and on one Spark local session (its start-up timed apart), each `--repeat`
   times (median), checksum verification on. Both engines' lines must be equal (asserted).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import peak_rss_mib, write_result

DATA = Path.home() / ".cache" / "gpuledger" / "bench-lake"
"""Outside the repository: the simulated day and the lake (about a hundred MB)."""
POLICIES = ("none", "proportional", "even")
MONEY = ("list_cost", "sharing_discount", "utilization_adjustment", "cost", "idle_cost")
BYS = (("cluster", "team"), ("team", "pool", "day"))


def one_day_detail(gpus: int) -> Any:
    """Step 1: the priced detail of one simulated day (cached beside the bench)."""
    import polars as pl

    cached = DATA / f"day-{gpus}.parquet"
    if cached.exists():
        return pl.read_parquet(cached)
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.core.config import Settings
    from gpuledger.core.window import Window
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import LoadBatch, Warehouse

    DATA.mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    window = Window(start, start + timedelta(days=1), timedelta(minutes=5))
    sim = Simulation(FleetSpec.default(gpus=gpus), window, seed=7)
    path = DATA / f"day-{gpus}.duckdb"
    path.unlink(missing_ok=True)
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for sub, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=sub))
    with Warehouse.open(path, read_only=True) as wh:
        detail = compute_bill(wh, window, Settings(), ("team",)).detail
    detail.write_parquet(cached)
    path.unlink(missing_ok=True)
    return detail


def cluster_detail(day: Any, index: int, days: int) -> Any:
    """Step 1: cluster `index`'s month: the day replayed, renamed, at its own price level."""
    import polars as pl

    from gpuledger.reports.lake_publish import DETAIL_DECIMAL, DETAIL_ORDER
    from gpuledger.warehouse.lake.org_sql import SUM_COLUMNS

    name = f"c{index:02d}"
    factor = 1.0 + 0.05 * index
    frames = []
    for d in range(days):
        frames.append(day.with_columns(pl.col("day") + timedelta(days=d)))
    month = pl.concat(frames, how="vertical")
    renamed = [pl.concat_str(pl.lit(f"{name}-"), pl.col(c)).alias(c) for c in ("uuid", "node", "pod")]
    scaled = [pl.col(c) * factor for c in (*MONEY, "unit_price")]
    month = month.with_columns(*renamed, *scaled, pl.lit(name).alias("cluster"))
    month = month.with_columns(*[pl.col(c).cast(DETAIL_DECIMAL) for c in SUM_COLUMNS])
    return name, month.sort(list(DETAIL_ORDER), nulls_last=True).select("cluster", *day.columns)


def publish(lake: Any, name: str, detail: Any, index: int) -> float:
    """Step 2: one partition; returns seconds."""
    import polars as pl

    from gpuledger.analytics.billing.money import to_cents
    from gpuledger.warehouse.lake.partition import publish_partition

    fleet_raw = float(detail["list_cost"].cast(pl.Float64).sum())
    facts = {
        "currency": "USD", "fleet_cost": to_cents(fleet_raw) / 100,
        "fleet_card_hours": round(float(detail["card_hours"].cast(pl.Float64).sum()), 6),
        "redistribution": POLICIES[index % len(POLICIES)], "price_book_version": f"bench-{index}",
        "mig_share_basis": "compute", "source": "bench", "unpriced_models": [],
        "unattributed_namespaces": [],
    }
    started = time.perf_counter()
    publish_partition(lake, name, "2026-11", {"bill_detail": detail}, bill=facts,
                      watermark="2026-11-30T23:55:00Z", now=datetime(2026, 12, 2, tzinfo=UTC))
    return time.perf_counter() - started


def median_time(fn: Any, repeat: int) -> tuple[Any, float, list[float]]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(round(time.perf_counter() - started, 3))
    return result, statistics.median(times), times


def run_org(lake: Any, clusters: tuple[str, ...], spark: Any, repeat: int) -> dict[str, Any]:
    """Step 3: both engines, both groupings, for one set of clusters."""
    from gpuledger.analytics.billing.org_bill import compute_org_bill

    out: dict[str, Any] = {}
    for by in BYS:
        key = ",".join(by)
        duck, duck_s, duck_all = median_time(
            lambda by=by: compute_org_bill(lake, "2026-11", by, engine="duckdb", clusters=clusters), repeat)
        spk, spk_s, spk_all = median_time(
            lambda by=by: compute_org_bill(lake, "2026-11", by, engine="spark", spark=spark,
                                           clusters=clusters), repeat)
        assert duck.lines.equals(spk.lines), f"engines differ for {key}"
        out[key] = {
            "lines": duck.lines.height, "fleet_cost": duck.fleet_cost,
            "duckdb_s": duck_s, "spark_s": spk_s, "duckdb_runs_s": duck_all, "spark_runs_s": spk_all,
            "engines_equal": True,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--clusters", default="3,10")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(x) for x in args.clusters.split(",")]
    from gpuledger.core.config_lake import LakeSettings
    from gpuledger.warehouse.lake.location import Lake
    from gpuledger.warehouse.lake.spark_engine import spark_session

    day = one_day_detail(args.gpus)
    root = DATA / "lake"
    shutil.rmtree(root, ignore_errors=True)
    lake = Lake.open(str(root))
    publish_s, rows = [], 0
    for index in range(max(sizes)):
        name, detail = cluster_detail(day, index, args.days)
        rows += detail.height
        publish_s.append(round(publish(lake, name, detail, index), 3))
    size_mib = sum(p.stat().st_size for p in root.rglob("*.parquet")) / 2**20
    started = time.perf_counter()
    spark = spark_session(LakeSettings(spark_master="local[*]"))
    spark.sparkContext.setLogLevel("ERROR")
    spark_start = time.perf_counter() - started
    results = {}
    for n in sizes:
        names = tuple(f"c{i:02d}" for i in range(n))
        figures = run_org(lake, names, spark, args.repeat)
        results[f"{n}_clusters"] = {"detail_rows": rows // max(sizes) * n, **figures}
    spark.stop()
    write_result("lake", {
        "setup": {
            "gpus_per_cluster": args.gpus, "days": args.days, "day_detail_rows": day.height,
            "detail_rows_total": rows, "lake_parquet_mib": round(size_mib, 1),
            "publish_s_per_cluster": publish_s, "spark_session_start_s": round(spark_start, 2),
            "spark_master": "local[*]", "verify_checksums": True, "repeat": args.repeat,
        },
        "org_bill": results, "peak_rss_mib": round(peak_rss_mib(), 1),
        "machine_load": Path("/proc/loadavg").read_text().split()[:3],
        "note": "Spark's figures exclude its session start (timed apart); both engines read the same "
                "Parquet files and their lines are asserted equal. Machine shared with other jobs.",
    })


if __name__ == "__main__":
    main()
