"""Read queries of usage: the hourly roll-up summed per day, the card-hours held per card and day,
the inventory the hourly frame joins, and the rules the roll-up's hours were computed under.

`analytics.usage` (the hourly frame, day usage, the roll-up) and the bill read these; the
numbers' meaning is theirs (docs/decisions/0132, 0133 for why the sums look as they do).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import polars as pl

from gpuledger.core.window import as_utc
from gpuledger.warehouse.protocols import ReadableWarehouse

DAY_US = 86_400_000_000

USAGE_KEYS = "uuid, gpu_i_id, vgpu, profile, namespace, pod, node, model, pool, sharing_mode, queue"
"""The roll-up's key and name columns a day's usage row keeps (device x holder grain)."""


def _rollup_sql(cols: str, day: str) -> str:
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


def _period_day(start: datetime, end: datetime, cuts: Sequence[datetime] | None) -> str:
    """SQL of the day number a roll-up row is summed under: its UTC day (`cuts` None), else
    the first day of the period between `cuts` (and the window's edges) it falls in."""
    if cuts is None:
        return f"epoch_us(ts) // {DAY_US}"
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
    return wh.query(_rollup_sql(cols, _period_day(start, end, cuts)), {"start": start, "end": end})


_CARD_DAY_SQL = f"""
SELECT epoch_us(ts) // {DAY_US} AS day_no, uuid, sum(card_hours) AS held_card_hours
FROM card_hours_hourly WHERE ts >= $start AND ts < $end
GROUP BY day_no, uuid
"""

_UNKNOWN_CARDS_SQL = """
SELECT uuid, min(node) AS _u_node, min(model) AS _u_model, min(pool) AS _u_pool
FROM card_hours_hourly WHERE ts >= $start AND ts < $end AND list_contains($cards, uuid)
GROUP BY uuid
"""


def card_day_held(wh: ReadableWarehouse, start: datetime, end: datetime) -> pl.DataFrame:
    """`day_no`, `uuid`, `held_card_hours`: card-hours held per card and day in the roll-up."""
    return wh.query(_CARD_DAY_SQL, {"start": start, "end": end})


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
