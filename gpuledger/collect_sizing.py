"""Chunk sizes for a backfill that keep memory bounded whatever the fleet (docs/decisions/0127).

A chunk is one load transaction and the unit the collector holds in memory (the chunk being
loaded and the one being built: two at most). `prometheus.chunk` (default a day) suits a small
fleet; at 1,000 GPUs a day is ~2.8 M sample rows and well over 2 GB resident. So collect
probes: the first chunk that holds samples is at most `PROBE`, its rows per hour set the size
of every later chunk: the largest divisor of a day, no longer than `prometheus.chunk`, whose
rows stay under `CHUNK_ROWS`. Chunk edges stay on multiples of the size since the epoch
(`collectors.chunks.plan_chunks`), so the stored rows and the roll-up do not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from gpuledger.core.window import HOUR, Window, floor_time, parse_duration

if TYPE_CHECKING:
    from gpuledger.collectors.chunks import Chunk
    from gpuledger.collectors.prometheus import ChunkData, PrometheusCollector

CHUNK_ROWS = 250_000
"""`gpu_samples` rows per chunk at most (measured ~2.6 KB resident per row in flight at 1,000
GPUs, bench/results/backfill.json: ~1 GB peak at this budget, under the 2 GB goal)."""
PROBE = HOUR
SIZES: tuple[timedelta, ...] = tuple(
    timedelta(minutes=m) for m in (1440, 720, 480, 360, 240, 180, 120, 60, 30, 20, 15, 10, 5, 1)
)
"""Divisors of a day, longest first: chunks on their multiples line up with UTC days."""


def chunk_size(rows_per_hour: float, longest: timedelta, step: timedelta) -> timedelta:
    """`longest` (the configured chunk) when its rows fit `CHUNK_ROWS`, else the longest of the
    shorter `SIZES` that fits (never under `step`)."""
    candidates = [longest, *(s for s in SIZES if s < longest)]
    fitting = [s for s in candidates if rows_per_hour * (s / HOUR) <= CHUNK_ROWS]
    return max(fitting[0] if fitting else candidates[-1], step)


def sized_chunks(
    collector: PrometheusCollector, window: Window, on_plan: Callable[[int], None] | None = None,
) -> Iterator[ChunkData]:
    """The collector's chunks over `window`: probe chunks of at most `PROBE` until one holds
    samples, then the rest at `chunk_size` of that chunk's rows per hour. `on_plan` hears the
    number of chunks planned so far (those done plus the new plan)."""
    from gpuledger.collectors.chunks import plan_chunks

    prom = collector.prom
    longest = parse_duration(prom.chunk)
    cursor, done, rate = window.start, 0, 0.0
    while cursor < window.end:
        rest = Window(cursor, window.end, window.step)
        if rate == 0.0:
            probe = min(longest, PROBE)
            edge = min(floor_time(cursor, probe) + probe, window.end)
            plan: list[Chunk] = list(plan_chunks(Window(cursor, edge, window.step), probe,
                                                 prom.max_points_per_query))
            if on_plan is not None:  # what the rest would take at the configured size
                on_plan(done + len(plan) + len(collector.plan(Window(edge, window.end, window.step)))
                        if edge < window.end else done + len(plan))
        else:
            plan = list(plan_chunks(rest, chunk_size(rate, longest, window.step),
                                    prom.max_points_per_query))
            if on_plan is not None:
                on_plan(done + len(plan))
        for data in collector.iter_chunks(rest, plan):
            done += 1
            if rate == 0.0 and data.samples:
                rate = data.samples / ((data.chunk.end - data.chunk.start) / HOUR)
            yield data
        cursor = plan[-1].end
