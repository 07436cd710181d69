"""`Period` is the one home of month arithmetic.

Cases: parse and str round-trip, `last` relative to an explicit `now` (January rolls back the
year, the first instant of a month is already in it), shift across years both ways, start/end
half-open and the window equal to `Window.month`, ordering and hashing, bad text is one line.
"""

from datetime import UTC, datetime, timedelta

import pytest

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period


def test_parse_and_str_round_trip():
    p = Period.parse(" 2026-11 ")
    assert (p.year, p.month) == (2026, 11)
    assert str(p) == "2026-11"
    assert Period.parse(str(p)) == p


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2026, 1, 15, tzinfo=UTC), "2025-12"),
        (datetime(2026, 3, 1, tzinfo=UTC), "2026-02"),
        (datetime(2026, 2, 28, 23, 59, 59, tzinfo=UTC), "2026-01"),
        # 01:00 on March 1st at +02:00 is still February in UTC
        (datetime.fromisoformat("2026-03-01T01:00:00+02:00"), "2026-01"),
    ],
)
def test_last_is_the_last_complete_month(now, expected):
    assert str(Period.parse("last", now=now)) == expected
    assert str(Period.parse("LAST", now=now)) == expected
    assert str(Period.last_complete(now)) == expected


def test_last_without_now_reads_the_clock():
    now = datetime.now(UTC)
    assert Period.parse("last") in (Period.last_complete(now), Period.last_complete(now + timedelta(minutes=1)))


@pytest.mark.parametrize(("n", "expected"), [(1, "2027-01"), (-12, "2025-12"), (-24, "2024-12"), (13, "2028-01"), (0, "2026-12")])
def test_shift_rolls_the_year(n, expected):
    assert str(Period.parse("2026-12").shift(n)) == expected


def test_bounds_and_window():
    dec = Period.parse("2026-12")
    assert dec.start == datetime(2026, 12, 1, tzinfo=UTC)
    assert dec.end == datetime(2027, 1, 1, tzinfo=UTC)
    assert dec.window == Period.exact("2026-12").window
    assert dec.window.step == timedelta(minutes=1)
    assert dec.window_at(timedelta(hours=1)).step == timedelta(hours=1)
    assert Period.of(datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == dec
    assert Period.of(dec.end) == dec.shift(1)


def test_ordering_and_hashing():
    months = [Period.parse(t) for t in ("2026-02", "2025-12", "2026-01", "2026-01")]
    assert [str(p) for p in sorted(set(months))] == ["2025-12", "2026-01", "2026-02"]
    assert Period.parse("2025-12") < Period.parse("2026-01")


@pytest.mark.parametrize("bad", ["2026-13", "2026-00", "26-01", "2026/01", "", "last month"])
def test_bad_text_is_one_line(bad):
    with pytest.raises(InputError, match="expected YYYY-MM") as info:
        Period.parse(bad)
    assert "\n" not in str(info.value)


def test_naive_moment_is_refused():
    with pytest.raises(InputError, match="naive"):
        Period.of(datetime(2026, 1, 1))
