"""Token counter increases read a UTC day at a time (issue 34) equal a plain reading of the
counters, here a Python walk over each series in time order (independent of the SQL):

- a reset (the counter drops: the new value is the increase since), here at a midnight;
- a gap of more than a day with no reset (the step spans the gap, as one query over the
  window takes it; a day-local reading would count the whole counter again);
- a series new inside the window (its first value counts), one whose first sample lies at the
  window's start (it does not), one measured from the day before the window (the lookback), one
  seen only in the lookback (no rows);
- a missing reading (NULL), which the sum skips as SQL's does;
- the same frame through kept day parts, filled and then read back without a query.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.analytics.workloads.tokens import token_increases
from gpuledger.core.frames import TABLES, polars_schema
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import DayParts
from tests.analytics.builders import Seg, at, gpus, load, namespaces, samples, window

Sample = tuple[datetime, str, float | None, float | None]  # ts, pod, prompt, generated

SERIES: list[Sample] = [
    # a: from the day before; reset at midnight of day 1; then silent 30 h with no reset
    *((at(h, days=-1), "a", 1000.0 + 100 * h, 500.0 + h) for h in (6, 12, 18)),
    (at(0), "a", 3000.0, 600.0), (at(12), "a", 3500.0, 650.0),
    (at(0, days=1), "a", 200.0, 20.0), (at(6, days=1), "a", 400.0, 40.0),
    (at(12, days=2), "a", 900.0, 90.0), (at(18, days=2), "a", 950.0, None),
    # b: new on day 0 at noon: its first value counts; a missing reading on day 1
    (at(12), "b", 70.0, 7.0), (at(1, days=1), "b", None, 9.0), (at(2, days=1), "b", 100.0, 12.0),
    # c: first sample exactly at the window's start: not an increase
    (at(0), "c", 5000.0, 50.0), (at(23, 59), "c", 5100.0, 55.0), (at(0, days=2), "c", 5300.0, 60.0),
    # d: only in the lookback day
    (at(3, days=-1), "d", 42.0, 4.0),
]


def _reference(rows: list[Sample], start: datetime, end: datetime, since: datetime) -> dict:
    """Each series walked in time order: a day's increase is the sum of its samples' steps."""
    by_pod: dict[str, list[Sample]] = defaultdict(list)
    for row in sorted(rows):
        by_pod[row[1]].append(row)
    out: dict[tuple[date, str], list[float | None]] = {}
    for pod, series in by_pod.items():
        before: Sample | None = None
        for row in series:
            ts = row[0]
            if not since <= ts < end:
                continue
            if ts >= start:
                sums = out.setdefault((ts.date(), pod), [None, None])
                lasts = (before[2], before[3]) if before is not None else (None, None)
                for i, (value, last) in enumerate(zip((row[2], row[3]), lasts, strict=True)):
                    if last is None:
                        step = (value if ts > start else 0.0) if value is not None else None
                    else:
                        step = None if value is None else (value - last if value >= last else value)
                    if step is not None:
                        sums[i] = (sums[i] or 0.0) + step
            before = row
    return {key: tuple(v) for key, v in out.items()}


@pytest.fixture(scope="module")
def counters(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [{"ts": ts, "namespace": "ml", "pod": pod, "model_name": "llama", "prompt_tokens_total": p,
             "generation_tokens_total": g} for ts, pod, p, g in SERIES]
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}),
        "gpu_samples": samples([Seg("GPU-1", at(0), at(1), "ml", "a")]),
        "namespaces": namespaces({"ml": "ml"}),
        "token_samples": pl.DataFrame(rows, schema=polars_schema(TABLES["token_samples"])),
    }
    return load(tmp_path_factory.mktemp("tokens") / "t.duckdb", window(96, at(days=-1)), frames)


def _as_dict(frame: pl.DataFrame) -> dict:
    return {(day, pod): (p, g) for day, pod, p, g in
            frame.select("day", "pod", "prompt_tokens", "generation_tokens").iter_rows()}


def test_read_a_day_at_a_time_equals_the_counters_walked_in_order(counters: Path) -> None:
    month = window(72)
    expected = _reference(SERIES, month.start, month.end, month.start - timedelta(days=1))
    assert expected[(date(2026, 11, 2), "a")] == (200.0 + 200.0, 20.0 + 20.0)  # the reset, by hand
    assert expected[(date(2026, 11, 3), "a")] == (500.0 + 50.0, 50.0)  # over the 30 h gap
    with Warehouse.open(counters, read_only=True) as wh:
        plain = token_increases(wh, month)
    assert _as_dict(plain) == expected
    assert not plain.filter(pl.col("pod") == "d").height


def test_through_day_parts_the_same_rows_and_a_second_read_queries_nothing(
        counters: Path, tmp_path: Path) -> None:
    month = window(72)
    with Warehouse.open(counters, read_only=True) as wh:
        plain = token_increases(wh, month)
        with DayParts(tmp_path / "parts.duckdb") as parts:
            filled = token_increases(wh, month, days=parts)
            assert (parts.reads, parts.hits) == (4, 0)  # the lookback day and three days
            kept = token_increases(wh, month, days=parts)
            assert (parts.reads, parts.hits) == (4, 4)
    assert filled.equals(plain) and kept.equals(plain)


def test_a_window_not_on_midnight_reads_its_edges_whole(counters: Path, tmp_path: Path) -> None:
    """Pieces that are not whole UTC days (the lookback and the edge days of an hour-aligned
    window) are read, never kept, and still join their neighbours exactly."""
    hours = window(50, at(6))  # day 0 from 06:00, day 1 whole, day 2 to 08:00
    expected = _reference(SERIES, hours.start, hours.end, hours.start - timedelta(days=1))
    with Warehouse.open(counters, read_only=True) as wh, DayParts(tmp_path / "p.duckdb") as parts:
        assert _as_dict(token_increases(wh, hours, days=parts)) == expected
        assert _as_dict(token_increases(wh, hours, days=parts)) == expected
        assert (parts.reads, parts.hits) == (3 + 1 + 3, 1)  # only the whole day 1 was kept
