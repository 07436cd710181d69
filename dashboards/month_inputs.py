"""What the results of a month share in a refresh (`dashboards.serving_results.compute`'s
`bills`): the month's bill, its rules and its per-allocation usage, each computed once on first
use; the bill let go as the usage is made (decision 0283), the usage after the last result that
reads it; and the allocations' statistics kept in the day parts before either exists (0282)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.warehouse.day_parts import DayParts

log = logging.getLogger(__name__)


def allocation_stats_first(wh: Warehouse, settings: Settings, period: str, days: DayParts) -> None:
    """The month's per-allocation statistics kept in `days` before anything else of the month is
    computed, so the usage reads them back from there (`DayParts.spanning`, decision 0282).

    Why: their statement (exact quantiles: DuckDB at its memory bound until it ends) ran inside
    the usage, beside the month's bill: at 10,000 GPUs under a 4 GiB bound the refresh's peak,
    6.3 GiB, was that bound on top of the bill's 2.5 GiB of frames. Before the bill it stands
    alone (4.4 GiB; DuckDB gives its memory back when the statement ends, 0.2 GiB after). Under
    the settings' activity rule: the usage reads statistics by its bill's rules, which a
    refresh's bill takes from the settings (`analytics.usage.plan`), so the usage finds this
    part. A failure here is the usage's to report: it computes them again."""
    from gpuledger.analytics.workloads.requested import allocation_stats, usage_activity

    try:
        allocation_stats(wh, Period.exact(period).window, usage_activity(None, settings), days)
    except Exception as exc:  # as a result's (refresh_results): never stops the refresh
        log.warning("serving store: allocation statistics for %s not kept first: %s", period,
                    (str(exc).splitlines() or [type(exc).__name__])[0])
    wh.hand_back_cache()


def month_bill(wh: Warehouse, window: Window, settings: Settings, bills: dict[str, Any]) -> Bill:
    """The month's bill, computed on first use and kept in `bills` (its rules under "rules")."""
    if "bill" not in bills:
        from gpuledger.analytics.billing.bill import compute_bill

        bills["bill"] = compute_bill(wh, window, settings)
        bills["rules"] = bills["bill"].rules
    bill: Bill = bills["bill"]
    return bill


def month_usage(wh: Warehouse, window: Window, settings: Settings, bills: dict[str, Any],
                days: DayParts | None) -> pl.DataFrame:
    """The month's per-allocation usage of its bill, computed on first use and kept in `bills`
    (its allocations' statistics through the refresh's day parts, `days`, where it keeps them).

    The bill leaves `bills` as the usage is made, before the usage's reads and joins: no result
    reads the bill after the usage (`serving_results.NAMES` puts the token costs, the one result
    that reads the bill itself, first; the recommendations and the profile catalog read the
    usage; their stored rules are the bill's, kept under "rules"). At 10,000 GPUs the bill's
    2.2 GiB of frames beside the usage were the refresh's peak, 4.7 GiB (decision 0283)."""
    if "usage" not in bills:
        from gpuledger.analytics.workloads import requested

        bill = month_bill(wh, window, settings, bills)
        activity = requested.usage_activity(bill.rules, settings)
        held = requested.idle_allocations_all(bill)
        del bills["bill"], bill
        bills["usage"] = requested.allocation_usage(wh, window, held, activity, days=days)
    usage: pl.DataFrame = bills["usage"]
    return usage
