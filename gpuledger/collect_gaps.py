"""Which sample holes a collect reads again (issue 31 item 6, docs/decisions/0182).

A chunk the engine answered without any DCGM series (an exporter outage, or a transient empty
answer of a query frontend) is loaded as nothing and the watermark moves past it, so that one
stuck chunk never stalls collection. Moving on must not mean giving up: the hole
(`warehouse.queries.gaps.sample_holes`, a span of the grid with no GPU sample on any card, at
least the staleness bound long) is read again on later rounds:

1. every collect re-reads the holes in `[now - prometheus.gap_retry_horizon, watermark)`;
2. a collect whose `--start` is below the watermark also re-reads the holes in
   `[--start, watermark)`, however old (the CronJob's lookback, or a person repairing a day);
3. holes are looked for only from the oldest GPU sample kept (retention prunes older raw
   samples; a pruned month is not a lost one);
4. a hole is closed by the rows that fill it (any run's), or by the horizon passing: older
   holes are no longer re-read on their own, and `gpuledger status` lists them as closed by
   the horizon. An engine that still answers empty for a hole gives nothing to load; the
   re-read costs one empty answer per query, and the hole stays open until the horizon.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.core.rules import STALENESS_US
from gpuledger.core.window import Window, floor_time, parse_duration

if TYPE_CHECKING:
    from gpuledger.core.config import Settings
    from gpuledger.warehouse.protocols import ReadableWarehouse

SHORTEST_HOLE = timedelta(microseconds=STALENESS_US)
"""A span without samples shorter than the staleness bound (Prometheus' 5-minute lookback) is
scrape spacing or a missed scrape, which the hole rule of the sampling model bridges; longer
is a lost read."""


def horizon(settings: Settings) -> timedelta:
    return parse_duration(settings.prometheus.gap_retry_horizon)


def holes_to_reread(
    wh: ReadableWarehouse, settings: Settings, window: Window, mark: datetime | None, now: datetime,
) -> list[Window]:
    """The holes this collect reads again (rules 1 to 3 of the module docstring), on the step
    grid of `window`, merged where they touch."""
    from gpuledger.warehouse.queries.gaps import first_sample, sample_holes

    first = first_sample(wh)
    if mark is None or first is None:
        return []
    step = window.step
    ranges = [(now - horizon(settings), mark)]
    if window.start < mark:
        ranges.append((window.start, min(window.end, mark)))
    spans: list[tuple[datetime, datetime]] = []
    for asked, hi in ranges:
        lo = max(floor_time(asked, step), floor_time(first, step))
        spans += sample_holes(wh, lo, floor_time(hi, step), step, SHORTEST_HOLE)
    merged: list[list[datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [Window(a, b, step) for a, b in merged]


@dataclass(frozen=True, slots=True)
class HoleStatus:
    """A hole below the watermark as `gpuledger status` shows it: `open` while a collect still
    re-reads it on its own (within the horizon), else closed by the horizon."""

    start: datetime
    end: datetime
    open: bool


def hole_status(wh: ReadableWarehouse, settings: Settings, mark: datetime | None, now: datetime, *,
                step: timedelta, look_back: timedelta) -> list[HoleStatus]:
    """The holes in `[mark - look_back, mark)` (from the oldest sample kept), each open or
    closed by the horizon."""
    from gpuledger.warehouse.queries.gaps import first_sample, sample_holes

    first = first_sample(wh)
    if mark is None or first is None:
        return []
    lo = floor_time(max(mark - look_back, first), step)
    edge = now - horizon(settings)
    return [HoleStatus(a, b, b > edge)
            for a, b in sample_holes(wh, lo, floor_time(mark, step), step, SHORTEST_HOLE)]


def hole_lines(holes: list[tuple[Window, int]], rerolled_days: int) -> list[str]:
    """The collect report's lines for the holes it read again, each with the GPU sample rows it
    gave (0: the engine still answers empty; the hole stays open until the horizon)."""
    if not holes:
        return []
    filled = sum(1 for _, n in holes if n)
    out = [f"holes read again: {len(holes)}, {filled} filled ({sum(n for _, n in holes)} GPU sample "
           f"rows), {len(holes) - filled} still empty (read again by later collects within "
           "prometheus.gap_retry_horizon)"]
    out += [f"  [{w.start.isoformat()}, {w.end.isoformat()}): {n} rows" for w, n in holes]
    if rerolled_days:
        out.append(f"rolled up {rerolled_days} day(s) again: holes filled after their roll-up")
    return out
