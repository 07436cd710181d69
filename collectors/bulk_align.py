"""Raw samples → the very `Matrix` the range-query path would have parsed, vectorised.

The query path reads every raw series as `promql.latest`: `last_over_time(x[step - 1ms] offset
-step/2)` on the chunk's grid (docs/decisions/0035, 0060), so instant t holds the newest sample
with a timestamp in the step centred on t. A bulk read returns the raw samples instead, and
this module applies the same rule, so the frames built from either path are identical (the
field tests compare them):

1. Bin: sample time s belongs to instant k when `t_k + h - (step - 1ms) <= s <= t_k + h`
   (h = step/2, rounded to the millisecond as PromQL's offset is). Prometheus 2 includes both
   ends of a range; VictoriaMetrics and Prometheus 3 exclude the left one (`left_open`), so a
   sample exactly `step - 1ms` before the right end belongs to no instant there, as in PromQL.
2. Keep instants inside the chunk, then the newest sample per (series, instant).
3. Series without any sample in the chunk are dropped (a range answer leaves them out); the
   rest are ordered per query as the engines sort a range answer (label sets without
   `__name__`, compared pair by pair, name then value: Prometheus' `labels.Compare`) and
   renumbered 0..n-1, samples series-major in time order, as `prom_parse` gives them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import TS_TYPE, Matrix, empty_matrix


@dataclass(frozen=True)
class RawRead:
    """Raw samples of one bulk answer: series labels and parallel sample arrays."""

    labels: list[dict[str, str]]
    """Label sets; with `label_set`, the distinct ones (a device's fields share one)."""
    query: np.ndarray
    """Per series: the index of the query (matcher set) it answers."""
    sid: np.ndarray
    ts_ms: np.ndarray
    value: np.ndarray
    """float64; the source's non-samples (staleness markers) already removed."""
    label_set: np.ndarray | None = None
    """Per series: its index in `labels` (None: series i has `labels[i]`). Why: the fields of
    one device carry the same labels but for `__name__` (dropped by the answer order and the
    frames alike), so keys, order and label columns are computed once per device, not once
    per series."""

    def sets(self) -> np.ndarray:
        """Per series: its label set's index in `labels`."""
        return self.label_set if self.label_set is not None else np.arange(len(self.labels))


def _ms(chunk: Chunk) -> tuple[int, int, int, int]:
    step = round(chunk.step.total_seconds() * 1000)
    start = round(chunk.start.timestamp() * 1000)
    return start, step, round(step / 2), chunk.points


def span_ms(chunk: Chunk) -> tuple[int, int]:
    """The sample times (inclusive, ms) the chunk's instants can read."""
    start, step, half, points = _ms(chunk)
    return start + half - step + 1, start + (points - 1) * step + half


def align(raw: RawRead, chunk: Chunk, queries: int, labels: Sequence[str], *,
          left_open: bool) -> list[Matrix]:
    """One `Matrix` per query index 0..queries-1, keeping `labels` (see the module docstring)."""
    start, step, half, points = _ms(chunk)
    sid, k, value = _newest_per_instant(raw, start, step, half, points, left_open=left_open)
    # 3. Series with samples, ranked per query in the engines' answer order.
    present = np.flatnonzero(np.bincount(sid, minlength=raw.query.size)) if sid.size else sid
    set_of = raw.sets()
    set_rank = _set_ranks(raw.labels)
    ordered = present[np.lexsort((present, set_rank[set_of[present]], raw.query[present]))]
    rank = np.full(raw.query.size, -1, dtype=np.int64)
    rank[ordered] = np.arange(ordered.size)
    sample_rank = rank[sid]
    if sample_rank.size > 1 and not (np.diff(sample_rank) >= 0).all():
        order = np.argsort(sample_rank, kind="stable")
        sample_rank, k, value = sample_rank[order], k[order], value[order]
    query_of_rank = raw.query[ordered]
    first_rank = np.searchsorted(query_of_rank, np.arange(queries + 1))
    bounds = np.searchsorted(sample_rank, first_rank)
    # One frame of series and one of samples for all queries, sliced per query (zero-copy).
    series = _label_frame(raw.labels, labels)[set_of[ordered]].select(
        pl.Series("sid", np.arange(ordered.size), dtype=pl.Int64), *labels)
    samples = pl.DataFrame({
        "sid": pl.Series(sample_rank, dtype=pl.Int64),
        "ts": pl.Series((start + k * step) * 1000, dtype=pl.Int64).cast(TS_TYPE),
        "value": pl.Series(value, dtype=pl.Float64),
    })
    out = []
    for q in range(queries):
        lo, hi = int(first_rank[q]), int(first_rank[q + 1])
        if lo == hi:
            out.append(empty_matrix(labels))
            continue
        renumber = (pl.col("sid") - lo).cast(pl.UInt32)
        a, b = int(bounds[q]), int(bounds[q + 1])
        out.append(Matrix(series.slice(lo, hi - lo).with_columns(renumber),
                          samples.slice(a, b - a).with_columns(renumber)))
    return out


def _newest_per_instant(raw: RawRead, start: int, step: int, half: int, points: int, *,
                        left_open: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1-2. (series, instant, value) of the newest sample per series and instant, sorted."""
    num = raw.ts_ms - (start + half - step + 1)
    # floor(num / step) in float64 is exact for |num| < 2**53 (a non-integer quotient is at
    # least 1/step from an integer, far more than the division's rounding): no integer division.
    k = np.floor(num / step).astype(np.int64)
    keep = (k >= 0) & (k < points)
    if left_open:
        keep &= num != k * step
    sid, ts = raw.sid, raw.ts_ms
    if sid.size > 1:
        step_sid = np.diff(sid)
        if ((step_sid > 0) | ((step_sid == 0) & (np.diff(ts) >= 0))).all():
            # Time-sorted per series (the answers' order): a kept sample is the newest of its
            # instant when the next sample is another series' or another instant's (a sample
            # left out by the left-open edge is the first of its step, never after a kept one).
            last = keep.copy()
            last[:-1] &= (step_sid != 0) | (k[1:] != k[:-1])
            return sid[last], k[last], raw.value[last]
    sid, k, ts, value = sid[keep], k[keep], ts[keep], raw.value[keep]
    key = sid * points + k
    order = np.lexsort((ts, key))
    key, sid, k, value = key[order], sid[order], k[order], value[order]
    newest = np.ones(key.size, dtype=bool)
    newest[:-1] = key[1:] != key[:-1]
    return sid[newest], k[newest], value[newest]


def _set_ranks(sets: Sequence[dict[str, str]]) -> np.ndarray:
    """Per label set: its dense rank in the engines' order (equal keys, equal ranks)."""
    keys = [_label_key(m) for m in sets]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranks = np.zeros(len(keys), dtype=np.int64)
    for position in range(1, len(order)):
        same = keys[order[position]] == keys[order[position - 1]]
        ranks[order[position]] = ranks[order[position - 1]] + (0 if same else 1)
    return ranks


def _label_frame(sets: Sequence[dict[str, str]], labels: Sequence[str]) -> pl.DataFrame:
    """One row per label set: the `labels` columns (an empty value is NULL, as parsed)."""
    return pl.DataFrame({name: [m.get(name) or None for m in sets] for name in labels},
                        schema={name: pl.String for name in labels})


def _label_key(labels: dict[str, str]) -> list[tuple[str, str]]:
    """Prometheus' order of label sets (code points sort as UTF-8 bytes do), name dropped."""
    return sorted((n, v) for n, v in labels.items() if n != "__name__" and v != "")
