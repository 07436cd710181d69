"""Card-hours per UTC day, device and holder: what the bill prices.

Two sources give the same numbers: the stored hourly roll-up (table `card_hours_hourly`, kept
after raw samples age out; fast for a month of a large fleet) and the raw samples (computed on
the fly by `analytics.usage.hourly`). `source="auto"` uses the roll-up for the whole hours it covers
(from its first row to the `card_hours_hourly` watermark) and raw samples for the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

import polars as pl

from gpuledger.analytics.usage.hourly import hourly_usage
from gpuledger.core.config import Settings
from gpuledger.core.frames import CARD_HOURS_HOURLY
from gpuledger.core.window import HOUR, Window, as_utc, floor_time
from gpuledger.warehouse import Warehouse

Source = Literal["auto", "raw", "rollup"]
ROLLUP_SOURCE = CARD_HOURS_HOURLY.name
"""Watermark name: every hour before it is in the roll-up."""

KEYS: tuple[str, ...] = (
    "day", "uuid", "gpu_i_id", "vgpu", "profile", "node", "model", "pool", "sharing_mode",
    "namespace", "pod", "queue",
)
_DAY_US = 86_400_000_000

def _rollup_sql(cols: str, day: str = f"epoch_us(ts) // {_DAY_US}") -> str:
    """Day sums of the roll-up per distinct combination of `cols` (the key columns).

    Where the seconds go (docs/decisions/0132): hashing the key strings is cheap, a hash table
    keyed on them is not, and every aggregate is paid once per roll-up row. So the rows are
    grouped under one 64-bit hash of the key columns with the fewest aggregates that give
    every usage column, and the names are read back only for one row per key (its smallest
    `rowid`), not by a second pass grouping every row by its strings. `day` is the SQL of the
    day number a row is summed under (`_period_day`).
    """
    return f"""
WITH sums AS (
    SELECT {day} AS day_no, hash({cols}) AS k, min(rowid) AS r,
        sum(held_hours) AS held_hours,
        sum(card_hours) AS card_hours,
        sum(idle_card_hours) AS idle_card_hours,
        sum(held_idle_card_hours) AS held_idle_card_hours,
        sum(card_hours * active_ratio) AS card_active,
        sum(card_hours) FILTER (WHERE active_ratio IS NULL) AS card_unknown,
        sum(held_hours * active_ratio) AS held_active,
        sum(held_hours) FILTER (WHERE active_ratio IS NOT NULL) AS held_known,
        max(fb_used_max_mib) AS fb_used_max_mib
    FROM card_hours_hourly WHERE ts >= $start AND ts < $end
    GROUP BY day_no, k
),
names AS (
    SELECT hash({cols}) AS k, {cols} FROM card_hours_hourly
    WHERE rowid IN (SELECT min(r) FROM sums GROUP BY k)
)
SELECT day_no, {cols}, held_hours, card_hours, idle_card_hours, held_idle_card_hours,
    coalesce(card_active, 0) + coalesce(card_unknown, 0) AS weighted_card_hours,
    coalesce(card_unknown, 0) AS activity_unknown_card_hours,
    held_active / nullif(held_known, 0) AS active_ratio,
    fb_used_max_mib
FROM sums JOIN names USING (k)
"""


_ROLLUP_SQL = _rollup_sql(
    "uuid, gpu_i_id, vgpu, profile, namespace, pod, node, model, pool, sharing_mode, queue"
)


def _active_ratio() -> pl.Expr:
    """Held-hour weighted mean of `active_ratio` over the rows that know it; NULL (activity
    unknown, docs/decisions/0051) when none does, never 0/0 = NaN."""
    known = pl.col("active_ratio").is_not_null()
    held_known = pl.when(known).then(pl.col("held_hours")).sum()
    ratio = (pl.col("held_hours") * pl.col("active_ratio")).sum() / held_known
    return pl.when(held_known > 0).then(ratio).otherwise(None).alias("active_ratio")


def _aggregates() -> list[pl.Expr]:
    return [
        pl.col("held_hours").sum(),
        pl.col("card_hours").sum(),
        pl.col("idle_card_hours").sum(),
        pl.col("held_idle_card_hours").sum(),
        (pl.col("card_hours") * pl.col("active_ratio").fill_null(1.0)).sum().alias("weighted_card_hours"),
        _unknown_card_hours(),
        _active_ratio(),
        pl.col("fb_used_max_mib").max(),
    ]


def _unknown_card_hours() -> pl.Expr:
    """Card-hours with no activity reading at all (`active_ratio` NULL: activity unknown)."""
    unknown = pl.col("active_ratio").is_null()
    held = pl.when(unknown).then(pl.col("card_hours")).otherwise(0.0)
    return held.sum().alias("activity_unknown_card_hours")


def _from_raw(wh: Warehouse, window: Window, settings: Settings) -> pl.DataFrame:
    hourly = hourly_usage(wh, window, settings)
    return (
        hourly.with_columns(pl.col("ts").dt.date().alias("day"))
        .group_by(list(KEYS))
        .agg(_aggregates())
    )


def _from_rollup(wh: Warehouse, window: Window) -> pl.DataFrame:
    return _day(wh.query(_ROLLUP_SQL, {"start": window.start, "end": window.end}))


_CARD_DAY_SQL = f"""
SELECT epoch_us(ts) // {_DAY_US} AS day_no, uuid, sum(card_hours) AS held_card_hours
FROM card_hours_hourly WHERE ts >= $start AND ts < $end
GROUP BY day_no, uuid
"""
"""Card-hours held per card and day (what unallocated capacity needs), one row per card-day."""

_UNKNOWN_CARDS_SQL = """
SELECT uuid, min(node) AS _u_node, min(model) AS _u_model, min(pool) AS _u_pool
FROM card_hours_hourly WHERE ts >= $start AND ts < $end AND list_contains($cards, uuid)
GROUP BY uuid
"""
"""The roll-up's node, model and pool of the cards the inventory lacks or leaves them NULL
(the bill takes the inventory's first): read only for those cards, usually none."""


def _day(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        (pl.col("day_no").cast(pl.Int64) * _DAY_US).cast(pl.Datetime("us", "UTC")).dt.date().alias("day")
    ).drop("day_no")


def _period_day(window: Window, cuts: Sequence[datetime] | None) -> str:
    """SQL of the day number a roll-up row is summed under: its UTC day (`cuts` None), else
    the first day of the period between `cuts` (and the window's edges) it falls in."""
    if cuts is None:
        return f"epoch_us(ts) // {_DAY_US}"
    starts = sorted({window.start, *(c for c in cuts if window.start < c < window.end)})
    expr = str(_day_number(starts[0]))
    for start in starts[1:]:
        expr = f"CASE WHEN ts >= TIMESTAMPTZ '{start.isoformat()}' THEN {_day_number(start)} ELSE {expr} END"
    return expr


def _day_number(moment: datetime) -> int:
    return int(as_utc(moment).timestamp() * 1_000_000) // _DAY_US


def coarse_usage_from_rollup(
    wh: Warehouse, window: Window, keys: Sequence[str], cuts: Sequence[datetime] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Roll-up usage summed per day and `keys` only (no device x holder grain), plus the
    card-hours held per card and day that unallocated capacity needs.

    With `cuts` (the moments a price may change, `analytics.billing.prices.price_changes`) the usage
    is summed per period between them instead of per day, its `day` the period's first day:
    the same money, 30 times fewer rows for a month at one price (docs/decisions/0133).
    """
    cols = ", ".join(dict.fromkeys(keys))
    sql = _rollup_sql(cols, _period_day(window, cuts))
    usage = _normalize(_day(wh.query(sql, {"start": window.start, "end": window.end})))
    return usage, card_day_held(wh, window)


def card_day_held(wh: Warehouse, window: Window) -> pl.DataFrame:
    """`uuid`, `day`, `held_card_hours` (+ the roll-up's names of cards the inventory lacks:
    `_u_node`, `_u_model`, `_u_pool`) from the roll-up, what the bill's unallocated rows need;
    summed in SQL rather than from a device-grain usage frame of millions of rows."""
    params = {"start": window.start, "end": window.end}
    held = _day(wh.query(_CARD_DAY_SQL, params))
    known = wh.query(
        "SELECT uuid FROM gpus WHERE node IS NOT NULL AND model IS NOT NULL AND pool IS NOT NULL"
    )
    unknown = held.select("uuid").unique().join(known, on="uuid", how="anti")["uuid"].to_list()
    names = wh.query(_UNKNOWN_CARDS_SQL, {**params, "cards": unknown}) if unknown else pl.DataFrame(
        schema={"uuid": pl.String, "_u_node": pl.String, "_u_model": pl.String, "_u_pool": pl.String}
    )
    return held.join(names, on="uuid", how="left")


def rollup_span(wh: Warehouse, window: Window) -> Window | None:
    """The whole hours of `window` the roll-up covers, or None."""
    mark = wh.watermark(ROLLUP_SOURCE)
    first = wh.scalar("SELECT min(ts) FROM card_hours_hourly")
    if mark is None or first is None:
        return None
    lo = _ceil_hour(max(window.start, floor_time(as_utc(first), timedelta(days=1))))
    hi = floor_time(min(window.end, mark), HOUR)
    return Window(lo, hi, window.step) if lo < hi else None


def _ceil_hour(moment: datetime) -> datetime:
    floored = floor_time(moment, HOUR)
    return floored if floored == moment else floored + HOUR


def usage_by_day(
    wh: Warehouse, window: Window, settings: Settings, source: Source = "auto"
) -> tuple[pl.DataFrame, str]:
    """Day-level usage for `window` and which source it came from (`raw|rollup|mixed`)."""
    if source == "raw":
        return _normalize(_from_raw(wh, window, settings)), "raw"
    if source == "rollup":
        return _normalize(_from_rollup(wh, window)), "rollup"
    span = rollup_span(wh, window)
    if span is None:
        return _normalize(_from_raw(wh, window, settings)), "raw"
    parts = [_from_rollup(wh, span)]
    for lo, hi in ((window.start, span.start), (span.end, window.end)):
        if lo < hi:
            parts.append(_from_raw(wh, Window(lo, hi, window.step), settings))
    used = "rollup" if len(parts) == 1 else "mixed"
    frames = [_normalize(p) for p in parts]
    merged = pl.concat(frames, how="vertical")
    if len(parts) > 1:
        merged = _regroup(merged)
    return merged, used


def _regroup(frame: pl.DataFrame) -> pl.DataFrame:
    """Merge rows of one day-device-holder that came from two sources (a day cut by an edge)."""
    return _normalize(
        frame.group_by(list(KEYS)).agg(
            pl.col("held_hours").sum(),
            pl.col("card_hours").sum(),
            pl.col("idle_card_hours").sum(),
            pl.col("held_idle_card_hours").sum(),
            pl.col("weighted_card_hours").sum(),
            pl.col("activity_unknown_card_hours").sum(),
            _active_ratio(),
            pl.col("fb_used_max_mib").max(),
        )
    )


_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.Date(), "uuid": pl.String(), "gpu_i_id": pl.Int32(), "vgpu": pl.String(),
    "profile": pl.String(), "node": pl.String(), "model": pl.String(), "pool": pl.String(),
    "sharing_mode": pl.String(), "namespace": pl.String(), "pod": pl.String(),
    "queue": pl.String(), "held_hours": pl.Float64(), "card_hours": pl.Float64(),
    "idle_card_hours": pl.Float64(), "held_idle_card_hours": pl.Float64(),
    "weighted_card_hours": pl.Float64(), "activity_unknown_card_hours": pl.Float64(),
    "active_ratio": pl.Float64(), "fb_used_max_mib": pl.Float64(),
}


def _normalize(frame: pl.DataFrame) -> pl.DataFrame:
    """The usage schema; key columns a coarse query did not group by are NULL."""
    if frame.is_empty() and not frame.columns:
        return pl.DataFrame(schema=_SCHEMA)
    return frame.select([
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c) for c, t in _SCHEMA.items()
    ])
