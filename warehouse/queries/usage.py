"""Read queries of usage: the hourly roll-up summed per day, the card-hours held per card and day,
the inventory the hourly frame joins, and the rules the roll-up's hours were computed under.

`analytics.usage` (the hourly frame, day usage, the roll-up) and the bill read these; the
numbers' meaning is theirs (docs/decisions/0132, 0133 for why the sums look as they do). The
roll-up sums read whole UTC days from the daily roll-up and only the hours of partial days from
the hourly one (`Reads`, docs/decisions/0236).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from gpuledger.core.window import DAY, as_utc, floor_time
from gpuledger.warehouse import daily_rollup
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.utc_sql import DAY_US, utc_unit_number

USAGE_KEYS = daily_rollup.NAMES
"""The roll-up's key and name columns a day's usage row keeps (device x holder grain): the
daily roll-up's row name, so its rows and the hourly rows group alike."""


def _grouped_sql(cols: str, day: str, table: str, where: str, sums: str) -> str:
    """Partial usage sums of `table`'s rows matching `where`, per `day` and distinct `cols`.

    Where the seconds go (docs/decisions/0132): hashing the key strings is cheap, a hash table
    keyed on them is not, and every aggregate is paid once per roll-up row. So the rows are
    grouped under one 64-bit hash of the key columns with the fewest aggregates that give
    every usage column, and the names are read back only for one row per key (its smallest
    `rowid`), not by a second pass grouping every row by its strings. `day` is the SQL of the
    day number a row is summed under (`_period_day`).
    """
    return f"""(
    WITH sums AS (
        SELECT {day} AS day_no, hash({cols}) AS k, min(rowid) AS r, {sums}
        FROM {table} WHERE {where}
        GROUP BY day_no, k
    ),
    names AS (
        SELECT hash({cols}) AS k, {cols} FROM {table}
        WHERE rowid IN (SELECT min(r) FROM sums GROUP BY k)
    )
    SELECT day_no, {cols}, {_PARTS} FROM sums JOIN names USING (k)
)"""


_PARTS = ("held_hours, card_hours, idle_card_hours, held_idle_card_hours, card_active, card_unknown, "
          "held_active, held_known, fb_used_max_mib")


def _rollup_sql(cols: str, day: str, reads: Reads, *, merge: bool) -> str:
    """Day sums of the roll-up per distinct combination of `cols` (the key columns): the whole
    days of `reads` from the daily roll-up, its edge hours from the hourly one
    (`warehouse.daily_rollup`), their partial sums combined once. `merge`: a day number may
    come from both parts (periods between price changes), so their rows are summed again;
    without it the parts hold different days. The device grain (`cols` = `USAGE_KEYS`, no
    periods) reads the daily rows as stored: they are already one per day and name."""
    hourly, daily, where = daily_rollup.HOURLY, daily_rollup.DAILY, "ts >= $d0 AND ts < $d1"
    parts = []
    if reads.hourly:
        parts.append(_grouped_sql(cols, day, hourly, reads.hourly_where, daily_rollup.PARTIAL_SUMS))
    if reads.days is not None:
        if cols == USAGE_KEYS and not merge and day == _DAY_NO:
            parts.append(f"(SELECT {day} AS day_no, {cols}, {_PARTS} FROM {daily} WHERE {where})")
        else:
            parts.append(_grouped_sql(cols, day, daily, where, daily_rollup.DAILY_SUMS))
    rows = " UNION ALL ".join(f"SELECT * FROM {p}" for p in parts)
    if merge and len(parts) > 1:
        rows = f"SELECT day_no, {cols}, {daily_rollup.DAILY_SUMS} FROM ({rows}) GROUP BY day_no, {cols}"
    return f"""
SELECT day_no, {cols}, held_hours, card_hours, idle_card_hours, held_idle_card_hours,
    coalesce(card_active, 0) + coalesce(card_unknown, 0) AS weighted_card_hours,
    coalesce(card_unknown, 0) AS activity_unknown_card_hours,
    held_active / nullif(held_known, 0) AS active_ratio,
    fb_used_max_mib
FROM ({rows})
"""


_DAY_NO = utc_unit_number("ts", DAY_US)


@dataclass(frozen=True, slots=True)
class Reads:
    """Which rows of `[start, end)` a roll-up query reads: the whole UTC days (`days`) from the
    daily roll-up, the hours around them (`hourly`, at most two spans) from the hourly one."""

    hourly: tuple[tuple[datetime, datetime], ...]
    days: tuple[datetime, datetime] | None

    @classmethod
    def of(cls, start: datetime, end: datetime, cuts: Sequence[datetime] | None = None) -> Reads:
        """Whole days from the daily roll-up, unless a cut falls inside a day (a day row cannot
        be split; the bill's cuts are day starts, `analytics.billing.prices.price_changes`)."""
        start, end = as_utc(start), as_utc(end)
        first, last = _ceil_day(start), floor_time(end, DAY)
        inside = any(floor_time(c, DAY) != as_utc(c) for c in cuts or ())
        if first >= last or inside:
            return cls(((start, end),) if start < end else (), None)
        return cls(tuple((a, b) for a, b in ((start, first), (last, end)) if a < b), (first, last))

    @property
    def hourly_where(self) -> str:
        return " OR ".join(f"(ts >= $h{i}s AND ts < $h{i}e)" for i in range(len(self.hourly)))

    def params(self, **more: Any) -> dict[str, Any]:
        out: dict[str, Any] = dict(more)
        for i, (a, b) in enumerate(self.hourly):
            out[f"h{i}s"], out[f"h{i}e"] = a, b
        if self.days is not None:
            out["d0"], out["d1"] = self.days
        return out


def _ceil_day(moment: datetime) -> datetime:
    floored = floor_time(moment, DAY)
    return floored if floored == moment else floored + DAY


def _period_day(start: datetime, end: datetime, cuts: Sequence[datetime] | None) -> str:
    """SQL of the day number a roll-up row is summed under: its UTC day (`cuts` None), else
    the first day of the period between `cuts` (and the window's edges) it falls in."""
    if cuts is None:
        return _DAY_NO
    starts = sorted({start, *(c for c in cuts if start < c < end)})
    expr = str(day_number(starts[0]))
    for moment in starts[1:]:
        expr = f"CASE WHEN ts >= TIMESTAMPTZ '{moment.isoformat()}' THEN {day_number(moment)} ELSE {expr} END"
    return expr


def day_number(moment: datetime) -> int:
    """The UTC day number (days since 1970-01-01) of `moment`."""
    return int(as_utc(moment).timestamp() * 1_000_000) // DAY_US


def rollup_usage(
    wh: ReadableWarehouse, start: datetime, end: datetime, keys: Sequence[str] | None = None,
    cuts: Sequence[datetime] | None = None,
) -> pl.DataFrame:
    """`day_no`, the `keys` columns (default `USAGE_KEYS`) and the usage sums of the roll-up's
    rows in `[start, end)`, per day (or per period between `cuts`, `day_no` its first day)."""
    cols = ", ".join(dict.fromkeys(keys)) if keys is not None else USAGE_KEYS
    reads = Reads.of(start, end, cuts)
    if not reads.hourly and reads.days is None:
        return wh.query(_rollup_sql(cols, _DAY_NO, Reads(((start, start),), None), merge=False),
                        {"h0s": start, "h0e": start})
    sql = _rollup_sql(cols, _period_day(start, end, cuts), reads, merge=cuts is not None)
    return wh.query(sql, reads.params())


_CARD_DAY_SQL = """
SELECT epoch_us(ts) // {day_us} AS day_no, uuid, sum(card_hours) AS held_card_hours
FROM ({rows}) GROUP BY day_no, uuid
"""

_UNKNOWN_CARDS_SQL = """
SELECT uuid, min(node) AS _u_node, min(model) AS _u_model, min(pool) AS _u_pool
FROM card_hours_hourly WHERE ts >= $start AND ts < $end AND list_contains($cards, uuid)
GROUP BY uuid
"""


def card_day_held(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`day_no`, `uuid`, `held_card_hours`: card-hours held per card and day in the roll-up
    (whole days from the daily roll-up, edge hours from the hourly one)."""
    reads = Reads.of(start, end)
    rows = "SELECT ts, uuid, card_hours FROM {} WHERE {}"
    parts = [rows.format(daily_rollup.HOURLY, reads.hourly_where or "false")]
    if reads.days is not None:
        parts.append(rows.format(daily_rollup.DAILY, "ts >= $d0 AND ts < $d1"))
    return wh.query(_CARD_DAY_SQL.format(day_us=DAY_US, rows=" UNION ALL ".join(parts)), reads.params())


def rollup_card_names(
    wh: ReadableWarehouse, start: datetime, end: datetime, cards: list[str]
) -> pl.DataFrame:
    """`uuid`, `_u_node`, `_u_model`, `_u_pool`: the roll-up's names of `cards` (those the
    inventory lacks or leaves NULL; usually none, so read only for them)."""
    return wh.query(_UNKNOWN_CARDS_SQL, {"start": start, "end": end, "cards": cards})


def complete_cards(wh: ReadableWarehouse) -> pl.DataFrame:
    """`uuid` of the inventory's cards with a node, a model and a pool."""
    return wh.query("SELECT uuid FROM gpus WHERE node IS NOT NULL AND model IS NOT NULL AND pool IS NOT NULL")


def first_rollup_ts(wh: ReadableWarehouse) -> datetime | None:
    """The earliest hour of `card_hours_hourly`, or None when it is empty."""
    first = wh.scalar("SELECT min(ts) FROM card_hours_hourly")
    return as_utc(first) if first is not None else None


def gpu_inventory(wh: ReadableWarehouse) -> pl.DataFrame:
    """The inventory as the hourly frame joins it (`gpu_node`, `card_mode` renamed)."""
    return wh.query(
        "SELECT uuid, node AS gpu_node, model, pool, sharing_mode AS card_mode, replicas, "
        "memory_mib, first_seen, last_seen FROM gpus"
    )


def pods_between(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`namespace`, `pod`, `start_ts`, `queue`, `gpu_requests` of pods alive in `[start, end]`:
    one row per incarnation (a StatefulSet's recreated pod keeps its name, not its start)."""
    return wh.query(
        "SELECT namespace, pod, start_ts, queue, gpu_requests FROM pods WHERE end_ts >= ? AND start_ts < ?",
        [start, end],
    )


# The roll-up's rules (decision 0147) -----------------------------------------------------


def rollup_stamps(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`ts`, `rules`: each rolled-up hour in `[start, end)` and the rollup fingerprint of the
    rules it was computed under (`rollup_hours`, a row per hour: no scan of the roll-up itself).
    An hour the roll-up holds without a row was rolled up before rules were recorded."""
    return wh.query(
        "SELECT ts, rules FROM rollup_hours WHERE ts >= $start AND ts < $end ORDER BY ts",
        {"start": start, "end": end},
    )


def all_rollup_stamps(wh: ReadableWarehouse) -> pl.DataFrame:
    """`rollup_stamps` of every hour stored."""
    return wh.query("SELECT ts, rules FROM rollup_hours ORDER BY ts")


def rule_sets(wh: ReadableWarehouse, fingerprints: Sequence[str]) -> dict[str, str]:
    """The stored rules (JSON text, `core.rules.Rules.to_json`) of each of `fingerprints` known."""
    if not fingerprints:
        return {}
    rows = wh.query(
        "SELECT fingerprint, CAST(rules AS VARCHAR) AS rules FROM rule_sets "
        "WHERE list_contains($fps, fingerprint)",
        {"fps": list(fingerprints)},
    )
    return dict(zip(rows["fingerprint"].to_list(), rows["rules"].to_list(), strict=True))
