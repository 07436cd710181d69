"""The derived tables `allocations` and `card_hours_hourly`, as frames the roof loads.

The roll-up is computed from raw samples one window at a time (normally a UTC day, as the
collector closes it) and loaded with the `card_hours_hourly` watermark, so bills over long
periods read the small hourly table instead of every sample (`analytics.usage.daily`). A window
must start and end on the hour: the roll-up's rows are whole hours.

Both frames come from ONE evaluation of the sample pass (`analytics.sampling.sweep`, decision
0072: the pass is most of the roll-up's time, and running it once per frame paid for it twice);
since decision 0122 the pass sorts the window's rows once and works on integer arrays, so a
roll-up costs about what reading its rows costs, and one hour's roll-up about an hour's rows
plus the margin the model reads on each side.

Stamped (docs/decisions/0147): every row carries the rollup fingerprint of the rules it was
computed under (`rules`), the batch writes one `rollup_hours` row per hour of its window and
upserts the full rules into `rule_sets`, all in the load's one transaction. So a reader knows
what each stored hour means, and a bill under other rules never passes it off as its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from gpuledger.analytics.sampling import sweep
from gpuledger.analytics.sampling.results import allocation_frame, allocation_runs, hourly_frame
from gpuledger.analytics.usage.daily import ROLLUP_SOURCE
from gpuledger.analytics.usage.hourly import hourly_usage
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.frames import ALLOCATIONS, ROLLUP_HOURS, RULE_SETS, polars_schema
from gpuledger.core.rules import Rules, SamplingRules
from gpuledger.core.window import DAY, HOUR, Window, as_utc, floor_time
from gpuledger.warehouse import LoadBatch, Warehouse
from gpuledger.warehouse.retention import CompactionStats, compact
from gpuledger.warehouse.store import ROLLUP_DIRTY


def held_and_runs(wh: Warehouse, window: Window, rules: SamplingRules) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`sampling.results.held_hourly` and `allocation_runs` of `window`, from one pass."""
    pieces = sweep.run(wh, window, rules)
    return hourly_frame(pieces), allocation_frame(pieces)


def allocations_frame(
    wh: Warehouse, window: Window, rules: Rules, hourly: pl.DataFrame | None = None,
    runs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Table `allocations`: each holder's run on a device, split at UTC midnight."""
    runs = runs if runs is not None else allocation_runs(wh, window, rules.sampling)
    schema = polars_schema(ALLOCATIONS)
    if runs.is_empty():
        return pl.DataFrame(schema=schema)
    hourly = hourly if hourly is not None else hourly_usage(wh, window, rules)
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
        pl.col("share").fill_null(1.0), pl.col("sharing_mode").fill_null("exclusive"),
        pl.lit(rules.rollup_fingerprint).alias("rules"),
    )
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()]).sort(
        ["ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"], nulls_last=True
    )


def rollup_frames(wh: Warehouse, window: Window, rules: Rules) -> dict[str, pl.DataFrame]:
    """Frames for tables `card_hours_hourly` and `allocations` over an hour-aligned window,
    plus their stamps (`rollup_hours`, `rule_sets`: module docstring)."""
    if floor_time(window.start, HOUR) != window.start or floor_time(window.end, HOUR) != window.end:
        raise InputError(f"roll-up window {window}: must start and end on the hour")
    held, runs = held_and_runs(wh, window, rules.sampling)
    hourly = hourly_usage(wh, window, rules, held)
    return {
        "card_hours_hourly": hourly,
        "allocations": allocations_frame(wh, window, rules, hourly, runs),
        **stamp_frames(window, rules),
    }


def stamp_frames(window: Window, rules: Rules) -> dict[str, pl.DataFrame]:
    """`rollup_hours` (each hour of `window` with the rollup fingerprint of `rules`) and
    `rule_sets` (the rules themselves, first used at the window's start)."""
    fingerprint = rules.rollup_fingerprint
    hours = pl.datetime_range(window.start, window.end - HOUR, HOUR, time_zone="UTC", eager=True)
    return {
        ROLLUP_HOURS.name: pl.DataFrame({"ts": hours, "rules": [fingerprint] * len(hours)},
                                        schema=polars_schema(ROLLUP_HOURS)),
        RULE_SETS.name: pl.DataFrame({"fingerprint": [fingerprint], "rules": [rules.to_json()],
                                      "first_used": [window.start]}, schema=polars_schema(RULE_SETS)),
    }


def rollup_batch(wh: Warehouse, window: Window, settings: Settings) -> LoadBatch:
    """A batch the roof loads (with a writer) to store the roll-up of `window` under the rules
    of `settings` (`Rules.of`, built here: the roll-up's edge).

    It moves the `card_hours_hourly` watermark to the window's end: roll up windows in order
    (`reroll_batch` re-rolls a past window without moving it back).
    """
    return LoadBatch(
        frames=rollup_frames(wh, window, Rules.of(settings)), window=window,
        watermarks={ROLLUP_SOURCE: window.end},
    )


def reroll_batch(wh: Warehouse, window: Window, rules: Rules) -> LoadBatch:
    """`rollup_batch` of a window already rolled up (`gpuledger rollup`, `compact`): the same
    frames, no watermark moved."""
    return LoadBatch(frames=rollup_frames(wh, window, rules), window=window)


@dataclass(frozen=True)
class DirtyRerolled:
    """What `reroll_dirty` did: the day windows rolled up again, those left (their raw samples
    compacted before the late ones arrived), the rows stored."""

    days: tuple[Window, ...] = ()
    left: tuple[Window, ...] = ()
    rows: int = 0


def dirty_from(wh: Warehouse, rules: SamplingRules) -> datetime | None:
    """The first hour the late samples under `ROLLUP_DIRTY` change (docs/decisions/0185): a
    sample reaches the hours within the sample pass's margin before it."""
    dirty = wh.watermark(ROLLUP_DIRTY)
    return None if dirty is None else floor_time(dirty - rules.margin, HOUR)


def reroll_dirty(wh: Warehouse, settings: Settings) -> DirtyRerolled:
    """Roll up again, under the current rules, every day from the first hour late samples
    changed (`dirty_from`) to the roll-up's watermark, without moving it, then clear the mark:
    hours already rolled up and settled that late data changed (a re-read gap, an explicit
    `--start` below the watermark, a reload) before anything freezes them (compact, finalize).

    Days whose raw samples are gone stay as they are (`left`): nothing can compute them again.
    Every day is one load (its own transaction); the mark is cleared with the last, so a crash
    in between leaves it for the next caller."""
    from gpuledger.analytics.usage.plan import raw_from

    rules = Rules.of(settings)
    start, mark = dirty_from(wh, rules.sampling), wh.watermark(ROLLUP_SOURCE)
    if start is None:
        return DirtyRerolled()
    if mark is None or start >= mark:
        wh.load(LoadBatch({}, watermarks={ROLLUP_DIRTY: None}))
        return DirtyRerolled()
    kept = raw_from(wh, rules)
    days, left, rows = [], [], 0
    day = floor_time(start, DAY)
    while day < mark:
        window = Window(day, min(day + DAY, mark))
        if kept is not None and window.start < kept:
            left.append(window)
        else:
            days.append(window)
        day += DAY
    for n, window in enumerate(days):
        batch = reroll_batch(wh, window, rules)
        if n == len(days) - 1:
            batch = LoadBatch(batch.frames, batch.window, {ROLLUP_DIRTY: None})
        rows += wh.load(batch).total_rows
    if not days:
        wh.load(LoadBatch({}, watermarks={ROLLUP_DIRTY: None}))
    return DirtyRerolled(tuple(days), tuple(left), rows)


def compact_raw_samples(wh: Warehouse, settings: Settings, now: datetime) -> CompactionStats:
    """Age raw GPU samples out (`warehouse.retention`, docs/decisions/0071): keep the last
    `retention.raw_days` whole UTC days, plus the sample pass's margin before them, and
    nothing the roll-up does not hold; hours late samples changed are rolled up again first
    (`reroll_dirty`), so the roll-up it leaves is never older than the samples it removes.
    What `gpuledger compact` and a scheduled job call (after re-rolling the hours about to lose
    their samples that other rules rolled up, `gpuledger.collect_rollup.reroll`)."""
    reroll_dirty(wh, settings)  # late samples re-rolled before their raw rows can go (0185)
    keep_from, margin = compaction_bounds(settings, now)
    return compact(wh, keep_from, margin=margin, rollup_source=ROLLUP_SOURCE)


def compaction_bounds(settings: Settings, now: datetime) -> tuple[datetime, timedelta]:
    """(`keep_from`, `margin`) of a compaction at `now`: the first raw day kept, and the sample
    pass's read margin kept before it."""
    keep_from = floor_time(as_utc(now), DAY) - timedelta(days=settings.retention.raw_days)
    return keep_from, SamplingRules.of(settings).margin
