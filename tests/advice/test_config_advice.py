"""Advice settings: weekly maintenance ranges parse to minutes of the week or fail in one line.

Cases: a same-day range, a range past midnight without a day (next day), one naming its end
day (wrapping into next week from Sunday), bad hours and unknown days and zones refused; the
CLI's `--kind` choices are exactly the registered kinds.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuledger.core.config_advice import MaintenanceWindow, parse_weekly_range


def test_ranges_in_minutes_of_the_week() -> None:
    assert parse_weekly_range("Mon 01:00-05:30") == (60, 330)
    assert parse_weekly_range("sat 22:00-02:00") == (5 * 1440 + 1320, 6 * 1440 + 120)
    assert parse_weekly_range("sun 22:00-mon 02:00") == (6 * 1440 + 1320, 7 * 1440 + 120)
    assert parse_weekly_range("fri 00:00-24:00") == (4 * 1440, 5 * 1440)


@pytest.mark.parametrize("bad", ["sat 25:00-26:00", "xyz 01:00-02:00", "sat 1-2", "sat 01:00-24:30"])
def test_bad_ranges_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_weekly_range(bad)
    with pytest.raises(ValidationError):
        MaintenanceWindow(weekly=(bad,))


def test_unknown_zone_and_keys_refused() -> None:
    with pytest.raises(ValidationError):
        MaintenanceWindow(timezone="Mars/Olympus")
    with pytest.raises(ValidationError):
        MaintenanceWindow.model_validate({"weekly": ["sat 01:00-02:00"], "days": 1})


def test_cli_choices_are_the_registered_kinds() -> None:
    from gpuledger.analytics.advice import KINDS
    from gpuledger.commands._recommend_advice import ADVICE_KINDS

    assert KINDS.names() == ADVICE_KINDS
    assert all(callable(fn) for fn in KINDS)  # every declared kind resolves to its function
