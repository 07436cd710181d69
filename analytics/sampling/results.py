"""Step 7 of the sampling model (`analytics.sampling.sweep` states the model and runs steps 1-6):
the pass's clipped pieces as the three frames the rest of gpuledger reads.

- `held_hourly`: held, idle and held-idle hours per device, holder and hour (what
  `card_hours_hourly` is priced from, `analytics.usage.hourly`);
- `allocation_runs`: each allocation (a run of one holder on one device) clipped to the window;
- `idle_runs`: the idle runs of at least the minimum, clipped (`run_hours`: full length).

Each takes the window and the typed `core.rules.SamplingRules`; the roll-up, which needs two of
them, runs the pass once (`sweep.run`) and shapes its pieces twice (`hourly_frame`,
`allocation_frame`, decision 0072).
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.sampling.sweep import Pieces, in_order, run
from gpuledger.core.rules import SamplingRules
from gpuledger.core.window import Window
from gpuledger.warehouse.protocols import ReadableWarehouse

HOUR_US = 3_600_000_000


def held_hourly(wh: ReadableWarehouse, window: Window, rules: SamplingRules) -> pl.DataFrame:
    """Held time per device, holder and hour (hours in `held_hours`, `idle_hours`, ...).

    `active_ratio` is NULL exactly when no row of that hour had an activity reading (carried
    ones included): activity unknown.
    """
    return hourly_frame(run(wh, window, rules))


def hourly_frame(pieces: Pieces) -> pl.DataFrame:
    """`held_hourly` of a pass already run (the roll-up shares one with the allocations)."""
    return hourly(pieces).with_columns(_us_to_ts("hour")).rename({"hour": "ts"})


def allocation_runs(wh: ReadableWarehouse, window: Window, rules: SamplingRules) -> pl.DataFrame:
    """Each allocation (a run of one holder on one device) clipped to the window."""
    return allocation_frame(run(wh, window, rules))


def allocation_frame(pieces: Pieces) -> pl.DataFrame:
    """`allocation_runs` of a pass already run."""
    return allocations(pieces).with_columns(_us_to_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    ).sort(["start_ts", "uuid", "gpu_i_id", "vgpu", "namespace", "pod"], nulls_last=True)


def idle_runs(wh: ReadableWarehouse, window: Window, rules: SamplingRules) -> pl.DataFrame:
    """Idle runs of at least the minimum, clipped to the window (`run_hours`: full length)."""
    return idle_pieces(run(wh, window, rules)).with_columns(_us_to_ts("start_us", "end_us")).rename(
        {"start_us": "start_ts", "end_us": "end_ts"}
    )


def _us_to_ts(*names: str) -> list[pl.Expr]:
    return [pl.col(n).cast(pl.Int64).cast(pl.Datetime("us", "UTC")) for n in names]


def hourly(pieces: Pieces) -> pl.DataFrame:
    """Step 7 for the hourly frame: split at the hour (an interval is at most the tolerance,
    never over 1 h, plus the staleness bound a holder's first row may reach back over a hole
    (decision 0168), so at most three parts), summed per hour, device and holder.

    Summed in two levels: first per allocation run and hour (a key that never decreases down
    the rows, since a run is consecutive rows of one holder on one device, so Polars groups
    slices), then those partial sums and the few parts past the hour per pair and hour (one
    integer key: the pair's number above the hour's). Card-hours are integer microseconds, so
    exactly the same; `active_ratio` is a float sum in another order (within 1e-12)."""
    rows = pieces.rows.filter(pl.col("b") > pl.col("a")).with_columns(
        (pl.col("a") - pl.col("a") % HOUR_US).alias("h0")
    )
    first = rows.select(
        "pair", "act", "fb", "long_idle", "held_idle", pl.col("h0").alias("hour"),
        (pl.min_horizontal("b", pl.col("h0") + HOUR_US) - pl.col("a")).alias("len"),
        (pl.col("alloc_no").cast(pl.Int64) * (1 << 24) + pl.col("h0") // HOUR_US).alias("g"),
    )
    later = rows.filter(pl.col("b") > pl.col("h0") + HOUR_US)
    second = later.select(
        "pair", "act", "fb", "long_idle", "held_idle", (pl.col("h0") + HOUR_US).alias("hour"),
        (pl.min_horizontal("b", pl.col("h0") + 2 * HOUR_US) - (pl.col("h0") + HOUR_US)).alias("len"),
    )
    third = later.filter(pl.col("b") > pl.col("h0") + 2 * HOUR_US).select(
        "pair", "act", "fb", "long_idle", "held_idle", (pl.col("h0") + 2 * HOUR_US).alias("hour"),
        (pl.col("b") - (pl.col("h0") + 2 * HOUR_US)).alias("len"),
    )
    second = pl.concat([second, third]) if third.height else second
    partial = in_order(first, "g").group_by("g").agg(pl.col("pair", "hour").first(), *_hour_sums())
    parts = pl.concat([partial.drop("g"), second.select("pair", "hour", *_hour_sums(each_row=True))])
    group = pl.col("pair").cast(pl.Int64) * (1 << 24) + pl.col("hour") // HOUR_US
    sums = parts.group_by(group.alias("g")).agg(
        pl.col("pair", "hour").first(),
        *[pl.col(c).sum() for c in ("held_hours", "idle_hours", "held_idle_hours", "known", "weighted")],
        pl.col("fb_used_max_mib").max(),
    )
    sums = sums.select(
        "pair", "hour", "held_hours", "idle_hours", "held_idle_hours",
        pl.when(pl.col("known") > 0).then(pl.col("weighted") / pl.col("known")).alias("active_ratio"),
        "fb_used_max_mib",
    )
    return _named(_in_hours(sums, "held_hours", "idle_hours", "held_idle_hours"), pieces, "hour")


def _hour_sums(each_row: bool = False) -> list[pl.Expr]:
    """Per part of an hour: held, idle and held-idle microseconds, those with an activity
    reading (`known`) and activity x length (`weighted`), the framebuffer maximum; summed over
    a group's rows, or one part's own (`each_row`)."""
    length = pl.col("len")
    exprs = [
        length.alias("held_hours"),
        pl.when(pl.col("long_idle")).then(length).otherwise(0).alias("idle_hours"),
        pl.when(pl.col("held_idle")).then(length).otherwise(0).alias("held_idle_hours"),
        pl.when(pl.col("act").is_not_null()).then(length).otherwise(0).alias("known"),
        (length * pl.col("act")).fill_null(0.0).alias("weighted"),
    ]
    if each_row:
        return [*exprs, pl.col("fb").alias("fb_used_max_mib")]
    return [*[e.sum() for e in exprs], pl.col("fb").max().alias("fb_used_max_mib")]


def allocations(pieces: Pieces) -> pl.DataFrame:
    """Each allocation (a run of one holder on one device) clipped to the window."""
    runs = in_order(pieces.rows.filter(pl.col("b") > pl.col("a")), "alloc_no").group_by("alloc_no").agg(
        pl.col("pair").first(), pl.col("a").min().alias("start_us"), pl.col("b").max().alias("end_us")
    ).drop("alloc_no")
    return _named(runs, pieces)


def idle_pieces(pieces: Pieces) -> pl.DataFrame:
    """Idle runs of at least the minimum, clipped to the window (`run_hours`: full length)."""
    rows = pieces.rows.filter(pl.col("long_idle") & (pl.col("b") > pl.col("a")))
    runs = in_order(rows, "idle_no").group_by("idle_no").agg(
        pl.col("pair").first(), pl.col("a").min().alias("start_us"), pl.col("b").max().alias("end_us"),
        (pl.col("b") - pl.col("a")).sum().alias("idle_hours"),
        pl.col("held_idle").any().alias("held"), pl.col("fb").max().alias("fb_used_max_mib"),
        pl.col("act").mean().alias("active_mean"), pl.col("run_us").first().alias("run_hours"),
    ).drop("idle_no")
    return _named(_in_hours(runs, "idle_hours", "run_hours"), pieces)


def _constant(name: str, value: float, height: int) -> pl.Series:
    """A divisor as a column of its own: Polars turns a division by a literal into a
    multiplication by its reciprocal (one ulp off SQL's IEEE division in about a quarter of the
    values), and the pass must give SQL's numbers exactly."""
    return pl.repeat(value, height, dtype=pl.Float64, eager=True).alias(name)


def _in_hours(frame: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """Microsecond sums as hours (each an IEEE division, `_constant`)."""
    frame = frame.with_columns(_constant("_hour", float(HOUR_US), frame.height))
    return frame.with_columns([pl.col(c).cast(pl.Float64) / pl.col("_hour") for c in columns]).drop("_hour")


_NAME_COLUMNS = ("uuid", "gpu_i_id", "vgpu", "profile", "node", "namespace", "pod")


def _named(frame: pl.DataFrame, pieces: Pieces, *first: str) -> pl.DataFrame:
    """Labels back on aggregated rows (by pair number, then the device and holder hashes)."""
    rest = [c for c in frame.columns if c not in {"pair", *first}]
    joined = frame.join(pieces.pairs, on="pair").join(pieces.names, on=["dev", "hold"], how="inner")
    return joined.select(*first, *_NAME_COLUMNS, *rest)
