"""Windows are half-open UTC intervals.

Cases: month boundaries (December rolls the year), naive times refused, bad durations and
periods named in the message, day splitting aligned to UTC midnight, aligned() covers the
window, clip/overlap on touching windows (half-open: no overlap).
"""

from datetime import UTC, datetime, timedelta

import pytest

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.window import Window, parse_duration, parse_instant


def test_month_windows_are_half_open_and_roll_the_year():
    dec = Period.exact("2026-12").window
    assert dec.start == datetime(2026, 12, 1, tzinfo=UTC)
    assert dec.end == datetime(2027, 1, 1, tzinfo=UTC)
    assert dec.hours == 31 * 24
    assert dec.contains(dec.start) and not dec.contains(dec.end)


@pytest.mark.parametrize("bad", ["2026-13", "26-01", "2026/01", ""])
def test_bad_period_is_named(bad):
    with pytest.raises(InputError, match="expected YYYY-MM"):
        Period.exact(bad)


def test_naive_times_are_refused():
    with pytest.raises(InputError, match="UTC offset"):
        parse_instant("2026-11-01T00:00:00")
    with pytest.raises(InputError, match="naive"):
        Window(datetime(2026, 11, 1), datetime(2026, 11, 2))


def test_instants_and_durations():
    assert parse_instant("2026-11-01") == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_instant("2026-11-01T02:00:00+02:00") == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("1h") == timedelta(hours=1)
    with pytest.raises(InputError, match="duration '5 minutes'"):
        parse_duration("5 minutes")


def test_days_split_at_utc_midnight():
    w = Window(datetime(2026, 11, 1, 18, tzinfo=UTC), datetime(2026, 11, 3, 6, tzinfo=UTC))
    days = list(w.days())
    assert [(d.start.hour, d.end.day, d.end.hour) for d in days] == [(18, 2, 0), (0, 3, 0), (0, 3, 6)]
    assert sum(d.hours for d in days) == w.hours


def test_aligned_covers_the_window_on_the_step_grid():
    w = Window(datetime(2026, 11, 1, 0, 0, 30, tzinfo=UTC), datetime(2026, 11, 1, 0, 5, 10, tzinfo=UTC))
    a = w.aligned()
    assert a.start == datetime(2026, 11, 1, tzinfo=UTC)
    assert a.end == datetime(2026, 11, 1, 0, 6, tzinfo=UTC)


def test_touching_windows_do_not_overlap():
    a = Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    b = Window(datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))
    assert not a.overlaps(b)
    assert a.clip(b) is None
