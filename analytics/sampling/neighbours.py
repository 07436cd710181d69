"""Step 3 of the sampling pass (`analytics.sampling.sweep`): each row's card's next and
previous scrape.

A row stands until its card's next scrape, not its device's: a time-slice replica's series
vanishes when its pod leaves while the card is still scraped, and a MIG card's instances
interleave in time. Found over the pass's one sort by (card-major device number, time) key,
by binary merges of a few sorted runs per card rather than a second sort.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def card_next(frame: pl.DataFrame, unit: int, devs: pl.DataFrame) -> list[pl.Series]:
    """Step 3: each row's card's next scrape and previous scrape (the next and previous distinct
    times on the card), else null.

    On a card with one device those are the device's next and previous rows; the rows of cards
    with several devices (MIG, vGPU) take the neighbouring distinct (card, time) keys
    (`distinct_neighbours`)."""
    next_row = pl.when(pl.col("dix") == pl.col("dix").shift(-1)).then(pl.col("t").shift(-1))
    prev_row = pl.when(pl.col("dix") == pl.col("dix").shift(1)).then(pl.col("t").shift(1))
    alone = frame.select(next_row.alias("t_card_next"), prev_row.alias("t_card_prev"))
    shared = devs["shared"].gather(frame["dix"])
    if not shared.any():
        return alone.get_columns()
    rows = frame.select("ckey", "t").filter(shared)
    after, before = distinct_neighbours(rows["ckey"].to_numpy(), unit)
    rows = rows.with_columns(pl.Series("after", after), pl.Series("before", before))
    found = rows.select(
        pl.when(pl.col(k) >= 0).then(pl.col(k) - pl.col("ckey") + pl.col("t")).alias(k)
        for k in ("after", "before")
    )
    at = shared.arg_true()
    return [alone["t_card_next"].scatter(at, found["after"]),
            alone["t_card_prev"].scatter(at, found["before"])]


def distinct_neighbours(keys: np.ndarray, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (card, time) key, the next greater and previous smaller key of its card, else -1.
    A stable argsort (numpy's timsort): the rows come card by card, each card's devices one
    after another in time order, so it merges a few sorted runs per card instead of sorting.
    A run of equal keys: the next distinct key is after its last, the previous before its first."""
    perm = np.argsort(keys, kind="stable")
    ordered = keys[perm]
    n = len(ordered)
    card = ordered // unit
    last = np.ones(n, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    run_end = np.minimum.accumulate(np.where(last, np.arange(n), n)[::-1])[::-1]
    after = np.append(ordered[1:], -1)[run_end]
    first = np.ones(n, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    run_start = np.maximum.accumulate(np.where(first, np.arange(n), -1))
    before = np.append(-1, ordered[:-1])[run_start]
    out_after, out_before = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    out_after[perm] = np.where((after >= 0) & (after // unit == card), after, -1)
    out_before[perm] = np.where((before >= 0) & (before // unit == card), before, -1)
    return out_after, out_before
