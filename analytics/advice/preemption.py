"""The admit-before-run recommendation: queues where preemption throws away a real share of spend.

Why a recommendation: a queue whose work is regularly preempted paid for GPU time it then
discarded. Admitting a workload only when its quota can hold it to the end (Kueue or Volcano
queueing with gang admission, instead of starting it on borrowed capacity that a
higher-priority arrival reclaims) would have saved that money: the lost cost is the saving.

A queue is flagged when its lost cost exceeds `share` of its spend on the bill (the cost of
the card-hours its pods held, `Bill.detail`), largest saving first.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.billing.bill import Bill

DEFAULT_SHARE = 0.05
"""Flag a queue losing more than 5 % of its spend to preemption."""


def admit_before_run(bill: Bill, losses: pl.DataFrame, share: float = DEFAULT_SHARE) -> pl.DataFrame:
    """Per flagged queue: lost GPU-hours and cost, spend, the lost share and a one-line message."""
    spend = (bill.detail.filter(pl.col("queue").is_not_null())
             .group_by("queue").agg(pl.col("cost").sum().alias("spend")))
    lost = (losses.filter(pl.col("queue").is_not_null())
            .group_by("queue").agg(pl.col("lost_gpu_hours").sum(), pl.col("lost_cost").sum()))
    frame = lost.join(spend, on="queue", how="inner").with_columns(
        (pl.col("lost_cost") / pl.col("spend")).alias("lost_share"),
    ).filter((pl.col("spend") > 0) & (pl.col("lost_share") > share))
    cur = bill.currency
    messages = [
        f"queue {r['queue']}: {r['lost_gpu_hours']:.1f} GPU-hours lost to preemption "
        f"({r['lost_share']:.0%} of its {cur} {r['spend']:,.2f} spend); admit-before-run would have "
        f"saved ${r['lost_cost']:,.2f}"
        for r in frame.iter_rows(named=True)
    ]
    return frame.with_columns(pl.Series("message", messages, dtype=pl.String)).sort(
        ["lost_cost", "queue"], descending=[True, False])
