"""Counter-based noise: a uniform number from integer keys, the same however data is chunked.

A stateful generator would give different numbers when a day is produced in one chunk or in
24; hashing `(seed, stream, a, b)` with splitmix64 gives each cell its own fixed value, so
samples, ground truth and the live `/metrics` view of one instant always agree.
"""

from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def uniform(seed: int, stream: int, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """Uniform [0, 1) per element of the broadcast of `a` and `b` (integers, may be negative)."""
    with np.errstate(over="ignore"):
        key = np.uint64((seed * 0x100000001B3 + stream * 0x1000193) & 0xFFFFFFFFFFFFFFFF)
        x = np.asarray(a, dtype=np.int64).astype(np.uint64) * _GOLD + key
        x = _mix(x ^ (np.asarray(b, dtype=np.int64).astype(np.uint64) * _M2 + _GOLD))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
