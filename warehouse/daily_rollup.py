"""The daily roll-up `card_hours_daily`: `card_hours_hourly` summed per UTC day and row name.

Why (issue 34, docs/decisions/0236): a bill over a month read ~720 hourly rows per device and
holder and summed them every time; a 10,000-card month is 14 M hourly rows, but 2.5 M day rows.
The bill reads whole days from this table and only the partial days at a window's edges from
the hourly one (`warehouse.queries.usage`).

Kept equal to the hourly roll-up by construction:
1. Derived, never loaded on its own: whenever a load writes `card_hours_hourly` for a window
   (a day's roll-up, a re-roll of late data, an hour of `collect --follow`), the same
   transaction rewrites the day rows of every UTC day the window touches from the hourly rows
   then stored (`refresh_days`), so a crash leaves both as they were, and a day's row is always
   the sum of that day's hourly rows, whatever rules each hour was rolled up under.
2. Its sums are the partial sums the readers combine (`card_active`, `card_unknown`,
   `held_active`, `held_known`: activity weights as the hourly query sums them), so summing
   day rows gives exactly what summing their hourly rows gives (floating-point order aside).
3. A row's name is the full set of usage key columns (`USAGE_KEYS`): a device whose node,
   pool or queue changed within a day has one row per name, as the hourly query groups them.
Schema v016 creates it and fills it from the hourly rows already stored; its day fingerprints
(v019, `warehouse.sample_fingerprints.ROLLUPS`) are kept by `refresh_days`, its one writer.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from gpuledger.core.window import DAY, Window, as_utc, floor_time
from gpuledger.warehouse.sample_fingerprints import BY_SOURCE, kept_current
from gpuledger.warehouse.utc_sql import DAY_US, utc_floor

if TYPE_CHECKING:
    import duckdb

HOURLY = "card_hours_hourly"
DAILY = "card_hours_daily"
NAMES = "uuid, gpu_i_id, vgpu, profile, namespace, pod, node, model, pool, sharing_mode, queue"
"""The day row's name columns, in the table's order; the usage readers group by the same
(`warehouse.queries.usage.USAGE_KEYS`)."""

PARTIAL_SUMS = """sum(held_hours) AS held_hours,
        sum(card_hours) AS card_hours,
        sum(idle_card_hours) AS idle_card_hours,
        sum(held_idle_card_hours) AS held_idle_card_hours,
        sum(card_hours * active_ratio) AS card_active,
        sum(card_hours) FILTER (WHERE active_ratio IS NULL) AS card_unknown,
        sum(held_hours * active_ratio) AS held_active,
        sum(held_hours) FILTER (WHERE active_ratio IS NOT NULL) AS held_known,
        max(fb_used_max_mib) AS fb_used_max_mib"""
"""The usage sums of hourly rows (decision 0132: the fewest aggregates that give every usage
column); `DAILY_SUMS` combines day rows the same way."""

DAILY_SUMS = """sum(held_hours) AS held_hours,
        sum(card_hours) AS card_hours,
        sum(idle_card_hours) AS idle_card_hours,
        sum(held_idle_card_hours) AS held_idle_card_hours,
        sum(card_active) AS card_active,
        sum(card_unknown) AS card_unknown,
        sum(held_active) AS held_active,
        sum(held_known) AS held_known,
        max(fb_used_max_mib) AS fb_used_max_mib"""

_REFRESH_SQL = f"""
INSERT INTO {DAILY}
SELECT {utc_floor('ts', DAY_US)} AS ts, {NAMES}, {PARTIAL_SUMS}
FROM {HOURLY} WHERE ts >= $start AND ts < $end
GROUP BY ALL ORDER BY ts
"""


def day_span(window: Window) -> tuple[datetime, datetime]:
    """The UTC days `window` touches: from its first day's start to its last day's end."""
    start, end = floor_time(window.start, DAY), floor_time(window.end, DAY)
    return start, end if end == as_utc(window.end) else end + DAY


def refresh_days(con: duckdb.DuckDBPyConnection, window: Window) -> None:
    """Rule 1: rewrite the day rows of every day `window` touches from the hourly rows stored.
    Run inside the load's transaction, after its hourly rows are written."""
    start, end = day_span(window)
    with kept_current(con, BY_SOURCE[DAILY], start, end):  # (0289)
        con.execute(f"DELETE FROM {DAILY} WHERE ts >= $start AND ts < $end", {"start": start, "end": end})
        con.execute(_REFRESH_SQL, {"start": start, "end": end})
