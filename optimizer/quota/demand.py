"""Demand history as one dense matrix: what every fit, floor, forecast and replay reads.

The history arrives long, one row per (time, queue, flavor, resource): a month at one-minute
samples is millions of rows, and a plan reads it many times over (a fit per backtest origin, a
replay per quota set, a floor per window). Here it is bucketed once into a grid: row i is the
bucket [start + i·step, start + (i+1)·step), column j a series, the cell its mean demand over the
bucket's sample times. A sample time without a row for a series counts as no demand (how a
history reports a quiet queue); a bucket without any sample time has count 0.

Windows (`window`) are row slices of the same grid, so a backtest origin's past and its
held-out days cost no re-bucketing; a coarser grid (`coarsen`) sums each bucket's demand over
its sample times and divides by their count, exactly as bucketing the long rows would.

Where the history also records what was running (admitted) at each sample, as the warehouse's
`queue_samples.usage` does, the grid keeps it beside the demand (`running`, bucketed the same
way): a replay of a window starts from what its first bucket recorded running, not from an
empty cluster (decision 0251).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

QuotaKey = tuple[str, str, str]
"""(queue, flavor, resource)."""
HOUR = timedelta(hours=1)
RESOLUTION = timedelta(minutes=5)
"""The replay's bucket (`optimizer.quota.replay`), and the one the warehouse sums samples on."""
_KEY_COLUMNS = ("cluster_queue", "flavor", "resource")


@dataclass(frozen=True, eq=False)
class Demand:
    start: datetime
    step: timedelta
    keys: tuple[QuotaKey, ...]
    values: np.ndarray
    """(buckets, series) mean demand per bucket."""
    counts: np.ndarray
    """(buckets,) sample times per bucket (0: none)."""
    running: np.ndarray | None = None
    """(buckets, series) mean amount recorded running (admitted) per bucket; None where the
    history records demand only."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {k: i for i, k in enumerate(self.keys)})

    @property
    def buckets(self) -> int:
        return int(self.values.shape[0])

    @property
    def end(self) -> datetime:
        return self.start + self.buckets * self.step

    @property
    def sampled(self) -> np.ndarray:
        """Rows of the buckets that hold a sample time."""
        return self.values[self.counts > 0]

    @property
    def opening(self) -> np.ndarray | None:
        """(series,) what the first bucket recorded running, never more than its demand; None
        where the history does not record it (a replay then starts from nothing running)."""
        if self.running is None or not self.buckets:
            return None
        return np.minimum(self.running[0], self.values[0])

    def index(self, key: QuotaKey) -> int | None:
        found: dict[QuotaKey, int] = self.__dict__["_index"]
        return found.get(key)

    def column(self, key: QuotaKey) -> np.ndarray:
        """One series over every bucket (zeros for a series the history never names)."""
        i = self.index(key)
        return self.values[:, i] if i is not None else np.zeros(self.buckets)

    def row_of(self, t: datetime) -> int:
        """The first bucket starting at or after `t`, within 0..buckets."""
        return min(self.buckets, max(0, -(-(t - self.start) // self.step)))

    def window(self, start: datetime | None = None, end: datetime | None = None) -> Demand:
        """The buckets starting in [start, end), on this grid."""
        a = 0 if start is None else self.row_of(start)
        b = self.buckets if end is None else max(a, self.row_of(end))
        return Demand(self.start + a * self.step, self.step, self.keys, self.values[a:b], self.counts[a:b],
                      None if self.running is None else self.running[a:b])

    def coarsen(self, step: timedelta) -> Demand:
        """The same demand on buckets of `step` (a multiple of this step, aligned at `start`)."""
        if step <= self.step:
            return self
        k = max(1, round(step / self.step))
        n = -(-self.buckets // k)
        pad = n * k - self.buckets
        counts = np.concatenate([self.counts, np.zeros(pad, dtype=self.counts.dtype)])
        total = counts.reshape(n, k).sum(axis=1)

        def means(grid: np.ndarray) -> np.ndarray:
            sums = np.concatenate([grid * self.counts[:, None], np.zeros((pad, len(self.keys)))])
            return sums.reshape(n, k, len(self.keys)).sum(axis=1) / np.maximum(total, 1)[:, None]

        return Demand(self.start, self.step * k, self.keys, means(self.values), total,
                      None if self.running is None else means(self.running))

    def hourly(self) -> tuple[list[datetime], np.ndarray]:
        """(clock hours from the first to the last sampled one, hours x series mean demand):
        each hour's demand summed over its sample times over their count."""
        rows = np.flatnonzero(self.counts > 0)
        if rows.size == 0:
            return [], np.zeros((0, len(self.keys)))
        first = self.start.replace(minute=0, second=0, microsecond=0)
        base = (self.start - first) // timedelta(microseconds=1)
        micro = self.step // timedelta(microseconds=1)
        hour = (base + np.arange(self.buckets, dtype=np.int64) * micro) // (HOUR // timedelta(microseconds=1))
        lo, hi = int(hour[rows[0]]), int(hour[rows[-1]])
        n = hi - lo + 1
        sums = np.zeros((n, len(self.keys)))
        np.add.at(sums, hour[rows] - lo, self.values[rows] * self.counts[rows, None])
        counts = np.bincount(hour[rows] - lo, weights=self.counts[rows], minlength=n)
        hours = [first + (lo + i) * HOUR for i in range(n)]
        return hours, sums / np.maximum(counts, 1)[:, None]

    def frame(self) -> pl.DataFrame:
        """The long form (`ts, cluster_queue, flavor, resource, demand`), every series at every
        bucket that holds a sample time."""
        rows = np.flatnonzero(self.counts > 0)
        micro = int(self.step / timedelta(microseconds=1))
        ts = pl.Series("ts", np.repeat(rows, len(self.keys)) * micro, dtype=pl.Int64)
        start = pl.lit(self.start).cast(pl.Datetime("us", "UTC"))
        index = np.tile(np.arange(len(self.keys)), rows.size)
        keys = pl.DataFrame([list(k) for k in self.keys] or None, schema=list(_KEY_COLUMNS), orient="row")
        return pl.DataFrame({"ts": ts, "i": index, "demand": self.values[rows].reshape(-1)}).join(
            keys.with_row_index("i").with_columns(pl.col("i").cast(pl.Int64)), on="i", how="left"
        ).select((start + pl.duration(microseconds=pl.col("ts"))).alias("ts"), *_KEY_COLUMNS, "demand")


def demand_of(frame: pl.DataFrame, step: timedelta, keys: Sequence[QuotaKey] = ()) -> Demand:
    """Bucket a long history (checked: one row per time and series) on `step` from its first
    time; `keys` are series to include even where the history names none (all zero). A
    `running` column, where the frame has one, is bucketed beside `demand`."""
    if frame.is_empty():
        return Demand(datetime.min, step, tuple(sorted(set(keys))), np.zeros((0, len(set(keys)))),
                      np.zeros(0))
    start = frame["ts"].min()
    assert isinstance(start, datetime)
    named = frame.select(_KEY_COLUMNS).unique()
    all_keys = tuple(sorted({(a, b, c) for a, b, c in named.iter_rows()} | set(keys)))
    lookup = pl.DataFrame([list(k) for k in all_keys], schema=list(_KEY_COLUMNS),
                          orient="row").with_row_index("i")
    micro = int(step / timedelta(microseconds=1))
    bucket = ((pl.col("ts") - pl.lit(start)).dt.total_microseconds() // micro).alias("b")
    recorded = "running" in frame.columns
    rows = frame.select(bucket, *_KEY_COLUMNS, "demand", *(["running"] if recorded else [])).join(
        lookup, on=list(_KEY_COLUMNS), how="left")
    b = rows["b"].to_numpy()
    n = int(b.max()) + 1
    times = frame.select(bucket, "ts").unique()
    counts = np.bincount(times["b"].to_numpy(), minlength=n).astype(float)
    return demand_from_sums(start, step, all_keys, bucket=b, series=rows["i"].to_numpy(),
                            demand=rows["demand"].to_numpy(), counts=counts,
                            running=rows["running"].fill_null(0.0).to_numpy() if recorded else None)


def demand_from_sums(start: datetime, step: timedelta, keys: Sequence[QuotaKey], *, bucket: np.ndarray,
                     series: np.ndarray, demand: np.ndarray, counts: np.ndarray,
                     running: np.ndarray | None = None) -> Demand:
    """A grid from per-bucket sums, one cell a row of `bucket`, `series` (index into `keys`) and
    `demand` (the sum over the bucket's sample times; `running` the same for the amount recorded
    running, where known); `counts` the sample times per bucket."""
    n, width = counts.size, len(keys)
    flat = bucket.astype(np.int64) * width + series.astype(np.int64)

    def means(summed: np.ndarray) -> np.ndarray:
        sums = np.bincount(flat, weights=summed, minlength=n * width).reshape(n, width)
        return sums / np.maximum(counts, 1)[:, None]

    return Demand(start, step, tuple(keys), means(demand), counts.astype(float),
                  None if running is None else means(running))
