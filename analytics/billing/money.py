"""Whole cents that add up: the largest-remainder method.

Rounding each line on its own can make a bill's lines miss the total by a few cents. Instead,
each column is rounded as a whole: every value is floored to the cent, and the cents still
missing to reach the rounded column total go to the values with the largest remainders
(ties: in order, so callers sort first). So the rounded lines sum exactly to the rounded total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def to_cents(amount: float) -> int:
    """Round half away from zero to whole cents (money is never banker's-rounded here)."""
    scaled = abs(amount) * 100
    cents = math.floor(scaled + 0.5 + 1e-9)
    return cents if amount >= 0 else -cents


def apportion_cents(values: Sequence[float], total: float | None = None) -> list[int]:
    """Whole cents per value, summing exactly to `to_cents(total or sum(values))`.

    A bill of a large fleet has tens of thousands of lines per money column, so the floors and
    the largest-remainder order are taken in numpy (the same IEEE arithmetic, a stable sort:
    ties still go in index order); only the quantization stays Python's correctly rounded
    `round`, skipped for zeros (most lines have no discount or adjustment).
    """
    import numpy as np

    if not values:
        return []
    target = to_cents(sum(values) if total is None else total)
    # Quantized so float noise (sums taken in another order) cannot flip a cent.
    scaled = np.array([round(v * 100, 6) if v else 0.0 for v in values], dtype=np.float64)
    floors = np.floor(scaled + 1e-7)
    out = floors.astype(np.int64)
    missing = target - int(out.sum())
    if missing:
        order = np.argsort(floors - scaled, kind="stable")  # largest remainder first
        rounds, extra = divmod(abs(missing), len(order))
        step = 1 if missing > 0 else -1
        out += step * rounds
        chosen = order[:extra] if missing > 0 else order[len(order) - extra:]
        out[chosen] += step
    return [int(c) for c in out]
