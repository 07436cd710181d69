"""How fresh what a page shows is: the serving snapshot's newest sample (the banner) and the one
"Stale" warning every page words the same way (the banner of samples, the Capacity page of the
node inventory).

Why in `pages`: the frame (`dashboards.shell`) and a page both say it, and the frame imports the
pages, never the other way round (no import cycle, the `lint-imports` contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dash import html

from gpuledger.dashboards.readmodel import ReadModel
from gpuledger.warehouse.queries import freshness


@dataclass(frozen=True)
class Newest:
    """The serving snapshot's newest sample time, and whether its samples are simulated
    (`freshness.simulated`: complete to their end, so no staleness applies)."""

    sample: datetime | None
    simulated: bool = False


def newest_sample_of(data: ReadModel) -> Newest:
    """The serving snapshot's newest sample time, read once per snapshot (the banner asks on
    every tick)."""

    def read() -> Newest:
        with data.store.reader(data.serving()) as wh:
            return Newest(freshness.newest_sample(wh), freshness.simulated(wh))

    return data.memo(("newest_sample",), read)


def stale_warning(newest: datetime, now: datetime, what: str, id: str) -> list[html.Span]:
    """" Stale: no new `what` for 2 h 5 min (more than 30 min, two collection intervals); is
    collection running?" when `newest` is older than two collection intervals
    (`freshness.is_stale`), else nothing."""
    if not freshness.is_stale(newest, now):
        return []
    limit = freshness.describe_age(freshness.STALE_INTERVALS * freshness.COLLECTION_INTERVAL)
    return [html.Span(f" Stale: no new {what} for {freshness.describe_age(now - newest)} (more than "
                      f"{limit}, two collection intervals); is collection running?",
                      id=id, className="warning")]
