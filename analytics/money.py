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
    """Whole cents per value, summing exactly to `to_cents(total or sum(values))`."""
    if not values:
        return []
    target = to_cents(sum(values) if total is None else total)
    # Quantized so float noise (sums taken in another order) cannot flip a cent.
    scaled = [round(v * 100, 6) for v in values]
    floors = [math.floor(s + 1e-7) for s in scaled]
    missing = target - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-(scaled[i] - floors[i]), i))
    out = list(floors)
    if missing >= 0:
        for k in range(missing):
            out[order[k % len(order)]] += 1
    else:
        for k in range(-missing):
            out[order[-1 - (k % len(order))]] -= 1
    return out
