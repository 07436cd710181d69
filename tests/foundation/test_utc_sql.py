"""`warehouse.utc_sql`: the integer floors equal DuckDB's `date_trunc` in UTC and Python's own
floor of the same instants (decision 0273), at unit boundaries and a microsecond either side."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from gpuledger.warehouse.utc_sql import DAY_US, HOUR_US, MINUTE_US, utc_floor, utc_unit_number

UNITS = {"minute": MINUTE_US, "hour": HOUR_US, "day": DAY_US}


def _instants() -> list[datetime]:
    """Boundaries of each unit (a leap day, a month's end, the epoch's first day) and a
    microsecond either side, and instants at odd offsets over three years."""
    edges = [datetime(2024, 2, 29, tzinfo=UTC), datetime(2026, 10, 31, 23, 59, tzinfo=UTC),
             datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(1970, 1, 2, tzinfo=UTC)]
    tick = timedelta(microseconds=1)
    out = [moment + delta for moment in edges for delta in (-tick, timedelta(0), tick)]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    out += [start + timedelta(seconds=7919 * i + i / 7) for i in range(2_000)]
    return out


def _python_floor(moment: datetime, unit_us: int) -> datetime:
    since = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=since // unit_us * unit_us)


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_the_integer_floor_is_date_trunc_in_utc(unit):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    moments = _instants()
    rows = con.execute(
        f"SELECT t, {utc_floor('t', UNITS[unit])}, date_trunc('{unit}', t), {utc_unit_number('t', UNITS[unit])} "
        "FROM (SELECT unnest($moments::TIMESTAMPTZ[]) AS t) ORDER BY t", {"moments": moments}).fetchall()
    assert len(rows) == len(moments)
    for moment, ours, truncated, number in rows:
        assert ours == truncated == _python_floor(moment, UNITS[unit])
        assert number * UNITS[unit] == (ours - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
