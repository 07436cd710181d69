"""Read queries for capacity: how long a card's last observation stands for.

A card's presence ends at its last sample plus what that sample stands for. That is the card's own
sample spacing (docs/decisions/0051-sampling-model.md), read here from the samples just before
its `last_seen`, not a configured scrape step: a card scraped every 5 minutes would otherwise
lose 4 minutes of capacity at the end of its data.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from gpuledger.warehouse.protocols import ReadableWarehouse

_TAIL = timedelta(hours=1)
"""How far before `last_seen` samples are read to measure the spacing (bounded work)."""

_SPACING_SQL = """
WITH recent AS (
    SELECT s.uuid, epoch_us(s.ts) AS t
    FROM gpu_samples s JOIN gpus g USING (uuid)
    WHERE g.last_seen >= $start AND g.last_seen < $end
      AND s.ts >= g.last_seen - $tail AND s.ts <= g.last_seen
    GROUP BY ALL
),
gaps AS (
    SELECT uuid, t - lag(t) OVER (PARTITION BY uuid ORDER BY t) AS dt FROM recent
)
SELECT uuid, CAST(median(dt) AS BIGINT) AS spacing_us
FROM gaps WHERE dt > 0 AND dt <= $max_gap
GROUP BY uuid
"""


def last_spacing(
    wh: ReadableWarehouse, start: datetime, end: datetime, *, max_gap_us: int,
) -> pl.DataFrame:
    """`uuid`, `spacing_us`: the median interval between a card's samples in the hour before its
    `last_seen`, for cards last seen in `[start, end)`; intervals over `max_gap_us` (the
    staleness bound) are gaps, not spacing. Cards without two such samples are absent."""
    frame = wh.query(_SPACING_SQL, {"start": start, "end": end, "tail": _TAIL, "max_gap": max_gap_us})
    return frame.select(pl.col("uuid").cast(pl.String), pl.col("spacing_us").cast(pl.Int64))
