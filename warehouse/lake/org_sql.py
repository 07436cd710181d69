"""The one query both engines run: the priced detail of every cluster, summed by the bill's
dimensions. Its text is built here once and handed to DuckDB and to Spark unchanged, so the two
engines cannot drift apart; everything after the sums (discount line, redistribution, whole
cents) is the same Python for both (`analytics.billing.org_bill`).

The summed columns are stored as DECIMAL(38, 12) in the lake, so the sums are exact in both
engines, whatever order or partitioning an engine adds them in: the two engines return the
same numbers digit for digit, not merely to within float noise.
"""

from __future__ import annotations

from collections.abc import Sequence

DETAIL_VIEW = "bill_detail"
SUM_COLUMNS: tuple[str, ...] = (
    "card_hours", "list_cost", "sharing_discount", "utilization_adjustment", "idle_card_hours",
    "held_idle_card_hours", "idle_cost", "activity_unknown_card_hours", "unpriced_card_hours",
)
"""The detail columns a bill line adds up (`analytics.billing.lines.SUMS`; a test keeps them equal)."""
GROUP_COLUMNS: tuple[str, ...] = (
    "cluster", "team", "namespace", "pod", "queue", "node", "pool", "model", "sharing_mode",
    "profile", "uuid", "day",
)
DECIMAL_TYPE = "DECIMAL(38, 12)"


def grouped_detail_sql(dims: Sequence[str]) -> str:
    """`SELECT cluster, dims..., SUM(x)... FROM bill_detail GROUP BY cluster, dims...`."""
    keys = list(dict.fromkeys(["cluster", *dims]))
    bad = [k for k in keys if k not in GROUP_COLUMNS]
    if bad:
        raise ValueError(f"org bill: {bad[0]!r} is not a lake detail column")
    sums = ", ".join(f"SUM({c}) AS {c}" for c in SUM_COLUMNS)
    group = ", ".join(keys)
    return f"SELECT {group}, {sums} FROM {DETAIL_VIEW} GROUP BY {group}"
