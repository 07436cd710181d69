"""The bill's special lines: the rows that are not a team.

Every card-hour lands on a team, on `unattributed` (used in a namespace without a team) or on
`unallocated` (capacity nobody held); `sharing_discount` funds the discounts of shared usage.
Bill, reports, dashboards and CLI all test for these names, so they are spelled once, here.
"""

from __future__ import annotations

from enum import StrEnum


class SpecialLine(StrEnum):
    """A bill line that is not a team; compares equal to its plain string."""

    UNATTRIBUTED = "unattributed"
    UNALLOCATED = "unallocated"
    SHARING_DISCOUNT = "sharing_discount"


SPECIAL_LINES: tuple[str, ...] = (
    SpecialLine.UNALLOCATED.value, SpecialLine.UNATTRIBUTED.value, SpecialLine.SHARING_DISCOUNT.value,
)
"""Every special line, in the order `analytics.teams.namespaces` has always listed them."""

IDLE_UNDEFINED: tuple[str, ...] = (SpecialLine.UNALLOCATED.value, SpecialLine.SHARING_DISCOUNT.value)
"""Lines that "allocated but idle" does not apply to: unallocated capacity was never held, and the
discounts' funding holds no GPU-hours. Their idle reads "–" wherever people read it, because a 0
(or "$0.00 / 0.0%") would claim that nothing idled."""
