"""The derived tables `allocations` and `card_hours_hourly`, as frames the roof loads.

The roll-up is computed from raw samples one window at a time (normally a UTC day, as the
collector closes it) and loaded with the `card_hours_hourly` watermark, so bills over long
periods read the small hourly table instead of every sample (`analytics.usage`). A window
must start and end on the hour: the roll-up's rows are whole hours.

Both frames come from ONE evaluation of the sample pass (`analytics.sampling_sql.RUNS_CTE`):
its window sorts are most of the roll-up's time, and running `HOURLY_SQL` and
`ALLOCATIONS_SQL` one after the other paid for them twice (docs/decisions/0072). The combined
statement is built from those two texts, not a copy of them, so the model stays in one place.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from gpuledger.analytics.hourly import hourly_usage
from gpuledger.analytics.samples import SampleRules, allocation_runs, params
from gpuledger.analytics.sampling_sql import ALLOCATIONS_SQL, HOURLY_SQL, RUNS_CTE
from gpuledger.analytics.usage import ROLLUP_SOURCE
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.frames import ALLOCATIONS, polars_schema
from gpuledger.core.window import DAY, HOUR, Window, as_utc, floor_time
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.retention import CompactionStats, compact


def _one_pass_sql() -> str:
    """`HOURLY_SQL` and `ALLOCATIONS_SQL` as one statement over one sample pass: each query's
    own tail becomes a nested CTE reading the shared (materialized) `pieces` and `names`, and
    the two results come back stacked, told apart by `part`."""
    head = f"WITH {RUNS_CTE},"
    tails = []
    for text in (HOURLY_SQL, ALLOCATIONS_SQL):
        body = text.strip()
        if not body.startswith(head):
            raise AssertionError("sampling_sql: a roll-up query no longer starts with RUNS_CTE")
        tails.append("WITH " + body[len(head):])
    shared = head
    for cte in ("pieces", "names"):  # read by both tails: evaluate once
        if f"\n{cte} AS (" not in shared:
            raise AssertionError(f"sampling_sql: RUNS_CTE has no CTE {cte}")
        shared = shared.replace(f"\n{cte} AS (", f"\n{cte} AS MATERIALIZED (")
    return (
        f"{shared}\nhourly_part AS ({tails[0]}),\nalloc_part AS ({tails[1]})\n"
        "SELECT 'hourly' AS part, * FROM hourly_part "
        "UNION ALL BY NAME SELECT 'alloc' AS part, * FROM alloc_part"
    )


_ONE_PASS_SQL = _one_pass_sql()
_HOURLY_OUT = ("hour", "uuid", "gpu_i_id", "vgpu", "profile", "node", "namespace", "pod",
               "held_hours", "idle_hours", "held_idle_hours", "active_ratio", "fb_used_max_mib")
_ALLOC_OUT = ("uuid", "gpu_i_id", "vgpu", "profile", "node", "namespace", "pod", "start_us", "end_us")


def _us_ts(*names: str) -> list[pl.Expr]:
    return [pl.col(n).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for n in names]


def held_and_runs(wh: Warehouse, window: Window, rules: SampleRules) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`samples.held_hourly` and `samples.allocation_runs` of `window`, from one pass."""
    both = wh.query(_ONE_PASS_SQL, params(window, rules))
    held = both.filter(pl.col("part") == "hourly").select(_HOURLY_OUT)
    held = held.with_columns(_us_ts("hour")).rename({"hour": "ts"})
    runs = both.filter(pl.col("part") == "alloc").select(_ALLOC_OUT)
    runs = runs.with_columns(_us_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    ).sort(["start_ts", "uuid", "gpu_i_id", "vgpu"], nulls_last=True)
    return held, runs


def allocations_frame(
    wh: Warehouse, window: Window, settings: Settings, hourly: pl.DataFrame | None = None,
    runs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Table `allocations`: each holder's run on a device, split at UTC midnight."""
    runs = runs if runs is not None else allocation_runs(wh, window, SampleRules.of(settings))
    schema = polars_schema(ALLOCATIONS)
    if runs.is_empty():
        return pl.DataFrame(schema=schema)
    hourly = hourly if hourly is not None else hourly_usage(wh, window, settings)
    keys = ["uuid", "gpu_i_id", "vgpu", "namespace", "pod"]
    facts = hourly.group_by(keys).agg(
        (pl.col("card_hours").sum() / pl.col("held_hours").sum()).alias("share"),
        pl.col("sharing_mode").first(),
        pl.col("queue").first(),
    )
    # Split at midnight: one row per allocation and day it touches.
    runs = runs.with_columns(
        pl.datetime_ranges(
            pl.col("start_ts").dt.truncate("1d"), pl.col("end_ts") - timedelta(microseconds=1),
            interval="1d", time_zone="UTC",
        ).alias("day")
    ).explode("day")
    runs = runs.with_columns(
        pl.max_horizontal(pl.col("start_ts"), pl.col("day")).alias("ts"),
        pl.min_horizontal(pl.col("end_ts"), pl.col("day") + DAY).alias("end_ts"),
    )
    frame = runs.join(facts, on=keys, how="left", nulls_equal=True).with_columns(
        pl.col("share").fill_null(1.0), pl.col("sharing_mode").fill_null("exclusive")
    )
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()]).sort(
        ["ts", "uuid", "gpu_i_id", "vgpu"], nulls_last=True
    )


def rollup_frames(wh: Warehouse, window: Window, settings: Settings) -> dict[str, pl.DataFrame]:
    """Frames for tables `card_hours_hourly` and `allocations` over an hour-aligned window."""
    if floor_time(window.start, HOUR) != window.start or floor_time(window.end, HOUR) != window.end:
        raise InputError(f"roll-up window {window}: must start and end on the hour")
    held, runs = held_and_runs(wh, window, SampleRules.of(settings))
    hourly = hourly_usage(wh, window, settings, held)
    return {
        "card_hours_hourly": hourly,
        "allocations": allocations_frame(wh, window, settings, hourly, runs),
    }


def rollup_batch(wh: Warehouse, window: Window, settings: Settings) -> LoadBatch:
    """A batch the roof loads (with a writer) to store the roll-up of `window`.

    It moves the `card_hours_hourly` watermark to the window's end: roll up windows in order.
    """
    return LoadBatch(
        frames=rollup_frames(wh, window, settings), window=window,
        watermarks={ROLLUP_SOURCE: window.end},
    )


def compact_raw_samples(wh: Warehouse, settings: Settings, now: datetime) -> CompactionStats:
    """Age raw GPU samples out (`warehouse.retention`, docs/decisions/0071): keep the last
    `retention.raw_days` whole UTC days, plus the sample pass's margin before them, and
    nothing the roll-up does not hold. What `gpuledger compact` and a scheduled job call."""
    keep_from = floor_time(as_utc(now), DAY) - timedelta(days=settings.retention.raw_days)
    margin = SampleRules.of(settings).margin
    return compact(wh, keep_from, margin=margin, rollup_source=ROLLUP_SOURCE)
