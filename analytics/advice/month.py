"""A month's analyses computed once in one process and handed to each consumer.

Why (issue 34, docs/decisions/0256): `gpuledger demo` prints the month's bill and advice, then
issues the month's report and stores the dashboard's month results. Each of those computed the
bill's per-allocation usage (`analytics.workloads.requested.workload_usage`, the month's
per-allocation activity and memory statistics) and the recommendations again on the same
warehouse: three usage reads and two recommendation rounds for one month. `MonthAnalyses` is
what was computed once, with the bill it was computed from; a consumer takes it only where that
bill is its own month's under its own rules (`matches`), so a report billed as the roll-up was
computed (`--as-computed`) under other rules computes its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.analytics.advice.run import Advice
    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.analytics.workloads.recommend import Recommendations


@dataclass(frozen=True)
class MonthAnalyses:
    """A month's bill and what was computed from it: the per-allocation `usage` of that bill,
    the `recommendations` from that usage and the `advice` kinds run on that bill (any of them;
    a consumer runs the kinds not here)."""

    bill: Bill
    usage: pl.DataFrame
    recommendations: Recommendations
    advice: tuple[Advice, ...] = ()

    @property
    def period(self) -> str:
        """The month, `YYYY-MM` (the bill's)."""
        return self.bill.period

    def matches(self, bill: Bill) -> bool:
        """Whether these analyses are valid for `bill`: the same window under the same rules
        (the bill's grain does not matter: usage reads its device-grain detail, equal at every
        `by`). A bill of unrecorded rules matches nothing."""
        return (bill.window == self.bill.window and bill.rules is not None
                and bill.rules == self.bill.rules)
