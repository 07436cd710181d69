"""How much of a month the warehouse has data for, and the rule that gates finalizing it.

Why: a month with 3 of 30 days collected bills a tenth of the fleet and, once finalized, is
locked that way; late data then arrives as a month of adjustments. So the share of the month's
hours with any GPU sample (or roll-up row, once raw samples have aged out) is measured, stated
on drafts and statements whenever it is below 100 %, recorded in the manifest, and a month
below `reports.min_coverage` (default 0.9) is not finalized unless `--allow-partial` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpuledger.core.config import Settings
from gpuledger.core.errors import ReportError
from gpuledger.core.window import Window, as_utc
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.reports import sampled_hours

HOUR = timedelta(hours=1)
DEFAULT_MIN_COVERAGE = 0.9


@dataclass(frozen=True)
class Coverage:
    """Hours of `window` with samples; `first`/`end` bound them (end exclusive)."""

    window: Window
    hours: int
    first: datetime | None
    end: datetime | None

    @property
    def total_hours(self) -> int:
        return int((self.window.end - self.window.start) / HOUR)

    @property
    def ratio(self) -> float:
        return self.hours / self.total_hours if self.total_hours else 0.0

    def describe(self) -> str:
        """One sentence naming the covered hours and range (printed on drafts and statements)."""
        if self.first is None or self.end is None:
            return f"Data coverage: no samples in {self.window.start:%Y-%m-%d} to {self.window.end:%Y-%m-%d}."
        return (
            f"Data coverage: samples in {self.hours} of {self.total_hours} hours "
            f"({self.ratio:.1%}), from {self.first:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC."
        )

    def as_manifest(self) -> dict[str, Any]:
        return {"hours": self.hours, "of_hours": self.total_hours, "ratio": round(self.ratio, 6),
                "first": _stamp(self.first), "end": _stamp(self.end)}


def _stamp(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def month_coverage(wh: Warehouse, window: Window) -> Coverage:
    """Measure `window`'s coverage from the warehouse."""
    hours, first, last = sampled_hours(wh, window.start, window.end)
    return Coverage(
        window, hours, as_utc(first) if first is not None else None,
        as_utc(last) + HOUR if last is not None else None,
    )


def min_coverage(settings: Settings) -> float:
    return float(getattr(settings.reports, "min_coverage", DEFAULT_MIN_COVERAGE))


def require_coverage(coverage: Coverage, settings: Settings, period: str, *, allow_partial: bool) -> None:
    """Refuse to finalize a month below `reports.min_coverage` unless partial data is allowed."""
    floor = min_coverage(settings)
    if allow_partial or coverage.hours == 0 or coverage.ratio >= floor:
        return  # an empty month is refused by the bill itself ("no GPU usage")
    raise ReportError(
        f"period {period}: only {coverage.hours} of {coverage.total_hours} hours "
        f"({coverage.ratio:.1%}) have samples"
        + (f" ({coverage.first:%Y-%m-%d %H:%M} to {coverage.end:%Y-%m-%d %H:%M} UTC)"
           if coverage.first and coverage.end else "")
        + f", below reports.min_coverage {floor:.0%}; collect the missing days, or finalize "
        "anyway with --allow-partial"
    )
