"""Steps 3-4 of `analytics.advice.autoscaling` on numpy arrays, bit for bit as the minute loop.

The replay used to walk every minute of the month in Python lists (a 256-GPU month: most of
the advice's 105 s). Here each part is computed with the very same floating-point operations,
so the proposal is identical, not merely close (docs/decisions/0134; the frozen loop is
tests/advice/autoscaling_reference.py and a test compares the two):

- Sliding-window means: the loop keeps a running total, `total += v` then `total -= old`.
  That is a strictly sequential sum of the interleaved steps v0..v(w-1), v(w), -v0, v(w+1), -v1,
  ... and `np.cumsum` (numpy's `add.accumulate`, sequential, not pairwise like `np.sum`) adds
  them in that order; `a - b` and `a + (-b)` round the same in IEEE 754.
- Desired replicas and the trailing min / max over the stabilization spans have no state:
  elementwise.
- The controller's state is the current count c, and what a minute does to it depends only on
  c and that minute's figures. So for each count c the replay meets, one vectorised pass finds
  the minutes at which a controller holding c would move, and the replay jumps from change to
  change (`np.searchsorted`) instead of stepping through the unchanged minutes in between.
- Over-target minutes: elementwise; where the squared ratio lands within a hair of the target
  (numpy squares by multiplying, Python's `**` calls libm `pow`), the minute is recomputed
  with the old expression, so the count cannot differ by rounding.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def window_means(values: Floats, width: int) -> Floats:
    """The loop's sliding-window mean (the first `width - 1` minutes average what there is)."""
    n = len(values)
    width = max(1, width)
    if n <= width:
        totals = np.cumsum(values)
    else:
        steps = np.empty(width + 2 * (n - width))
        steps[:width] = values[:width]
        steps[width::2] = values[width:]
        steps[width + 1::2] = -values[: n - width]
        cumulative = np.cumsum(steps)
        totals = np.concatenate([cumulative[:width], cumulative[width + 1::2]])
    return totals / np.minimum(np.arange(1, n + 1), width).astype(np.float64)


def trailing(values: Ints, span: int, *, largest: bool) -> Ints:
    """max (or min) of `values[i - span + 1 .. i]`, fewer at the start: the loop's
    `max(desired_hist[-span:])`."""
    out = values.copy()
    pick = np.maximum if largest else np.minimum
    for k in range(1, min(span, len(values))):
        out[k:] = pick(out[k:], values[:-k])
    return out


def replay(
    load_w: Floats, queue_w: Floats, floor: Ints, start: int, *, scale_up: float, scale_down: float,
    queue_target: float, up_span: int, down_span: int, top: int,
) -> Ints:
    """The proposed count per minute. `floor`: the time-of-day minimum at each minute;
    `start`: the count before the first minute; `top`: the maximum."""
    n = len(load_w)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    target = (scale_up + scale_down) / 2
    desired = np.maximum(1, np.ceil(np.maximum(load_w / target, queue_w / queue_target) - 1e-9))
    desired = desired.astype(np.int64)
    up_to = trailing(desired, up_span, largest=False)
    down_to = trailing(desired, down_span, largest=True)
    moves: dict[int, tuple[Ints, Ints]] = {}
    i, current = 0, start
    while i < n:
        if current not in moves:
            busy = (load_w / current > scale_up) | (queue_w / current > queue_target)
            quiet = (load_w / current < scale_down) & (queue_w / current < queue_target / 2)
            wanted = np.where(busy, np.maximum(current, up_to),
                              np.where(quiet, np.minimum(current, down_to), current))
            after = np.minimum(np.maximum(wanted, floor), top)
            at = np.flatnonzero(after != current)
            moves[current] = (at, after[at])
        at, to = moves[current]
        k = int(np.searchsorted(at, i))
        if k == len(at):
            out[i:] = current
            break
        j = int(at[k])
        out[i:j] = current
        current = int(to[k])
        out[j] = current
        i = j + 1
    return out


def over_target_minutes(
    load: Floats, queue: Floats, recorded: Ints, proposed: Ints, queue_target: float,
) -> int:
    """Step 4 counted over the minutes (the loop's `over_target`, summed)."""
    if len(load) == 0:
        return 0
    held = np.maximum(recorded, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        saturated = (proposed <= 0) | (load / proposed >= 1.0)
        per_replica = (queue / held) * (held / proposed) ** 2
    over = np.where(saturated, load > 0, per_replica > queue_target)
    close = np.flatnonzero(~saturated & (np.abs(per_replica - queue_target) <= 1e-9 * max(queue_target, 1.0)))
    for m in close:
        r, p = int(held[m]), int(proposed[m])
        over[m] = (float(queue[m]) / r) * (r / p) ** 2 > queue_target
    return int(np.count_nonzero(over))


def hour_lows(load: Floats, hours: Ints) -> dict[int, float]:
    """Step 2's statistic per UTC hour present in `hours`: the 5th percentile of the load, an
    observed value (the `lower` one, the k-th smallest for k = floor(0.05 (n - 1)): what Polars'
    `quantile(0.05, "lower")` gave, found by a partial sort of each hour's minutes). The minutes
    are grouped by hour with a stable sort of the hours as bytes (numpy's radix sort) and
    counted with `bincount`: 0.65 ms less a Deployment-month than a sort of int64 and `unique`
    (1.1 s of a 10,000-GPU month's 1,717 Deployments)."""
    hour = hours.astype(np.uint8)
    grouped = load[np.argsort(hour, kind="stable")]
    counts = np.bincount(hour, minlength=24)
    ends = np.cumsum(counts)
    out = {}
    for h in np.flatnonzero(counts).tolist():
        count, end = int(counts[h]), int(ends[h])
        k = math.floor((count - 1) * 0.05)
        out[h] = float(np.partition(grouped[end - count:end], k)[k])
    return out


def hour_floor(low: dict[int, float], scale_up: float) -> tuple[int, ...]:
    """Step 2 from the 5th percentile of the load per UTC hour (hours never seen: 1)."""
    return tuple(max(1, math.ceil(float(low.get(h, 0.0) or 0.0) / scale_up - 1e-9)) for h in range(24))
