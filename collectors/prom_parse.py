"""Prometheus JSON answers read straight into Polars (no Python loop over samples).

A range answer is `{"data": {"result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}`.
The result is two frames: one row per series (`sid` + the wanted labels) and one row per
sample (`sid`, `ts`, `value`), so label mapping runs once per series, not once per sample.

Two readers, same output:
1. Fast path (`_split_matrix`): the engines write this answer compactly and always in the same
   shape, so each series' `values` array is cut out of the bytes (no decoding), all of them are
   joined into one `t,"v"` line-per-sample text and read by Polars' CSV reader (Rust,
   multi-threaded; it parses `"NaN"`, `"+Inf"`). Only each series' small label object goes
   through `json`. Per-series sample counts come from counting `],[` separators.
2. Fallback: Polars' JSON reader with an explicit schema, used whenever the bytes do not have
   the expected shape (or the answer is an error), so an unusual engine still works.

HA replicas (`merge_replicas`) are merged here, on the parsed answer, because they are a fact of
the engine, not of the metric: two Prometheus replicas behind a query layer answer every
series twice, whatever exporter wrote it. So DCGM, vLLM and Kueue series share one rule.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import polars as pl

from gpuledger.collectors.quality import Quality
from gpuledger.core.errors import SourceError
from gpuledger.core.rules import STALENESS_US

TS_TYPE = pl.Datetime("us", "UTC")
REPLICA_LABELS: tuple[str, ...] = ("replica", "prometheus_replica")
"""Labels that tell HA Prometheus replicas apart (Thanos/Mimir/Cortex conventions); the default
of the collector's `replica_labels`."""


@dataclass(frozen=True)
class Matrix:
    """A parsed range answer: `series` (sid + labels) and `samples` (sid, ts, value)."""

    series: pl.DataFrame
    samples: pl.DataFrame

    @property
    def empty(self) -> bool:
        return self.samples.height == 0


def _schema(labels: Sequence[str]) -> dict[str, pl.DataType]:
    metric = pl.Struct({name: pl.String for name in labels}) if labels else pl.Struct({"__name__": pl.String})
    return {
        "status": pl.String(),
        "error": pl.String(),
        "data": pl.Struct({
            "resultType": pl.String,
            "result": pl.List(pl.Struct({"metric": metric, "values": pl.List(pl.List(pl.String))})),
        }),
    }


def empty_matrix(labels: Sequence[str]) -> Matrix:
    series = pl.DataFrame(schema={"sid": pl.UInt32, **{name: pl.String for name in labels}})
    samples = pl.DataFrame(schema={"sid": pl.UInt32, "ts": TS_TYPE, "value": pl.Float64})
    return Matrix(series, samples)


_RESULT = b'"result":['
_METRIC = b'{"metric":'
_VALUES = b',"values":['


def _split_matrix(body: bytes, labels: Sequence[str]) -> Matrix | None:
    """The fast path; None when the body is not a compact success matrix."""
    if not body.startswith(b'{"status":"success"'):
        return None
    pos = body.find(_RESULT)
    if pos < 0:
        return None
    pos += len(_RESULT)
    metrics: list[dict[str, str]] = []
    slices: list[bytes] = []
    counts: list[int] = []
    end = len(body)
    while pos < end and body[pos:pos + 1] != b"]":
        if body[pos:pos + 1] == b",":
            pos += 1
        if not body.startswith(_METRIC, pos):
            return None
        values_at = body.find(_VALUES, pos)
        if values_at < 0:
            return None
        try:
            metric = json.loads(body[pos + len(_METRIC):values_at])
        except ValueError:
            return None
        if not isinstance(metric, dict):
            return None
        metrics.append(metric)
        first = values_at + len(_VALUES)
        if body.startswith(b"]}", first):  # no samples
            counts.append(0)
            pos = first + 2
            continue
        close = body.find(b"]]}", first)
        if close < 0 or body[first:first + 1] != b"[":
            return None
        inner = body[first + 1:close]  # t,"v"],[t,"v"
        slices.append(inner)
        counts.append(inner.count(b"],[") + 1)
        pos = close + 3
    series = pl.DataFrame(
        {"sid": pl.Series(range(len(metrics)), dtype=pl.UInt32),
         **{name: [m.get(name) or None for m in metrics] for name in labels}},
        schema={"sid": pl.UInt32, **{name: pl.String for name in labels}},
    )
    total = sum(counts)
    if not total:
        return Matrix(series, empty_matrix(labels).samples)
    text = b"\n".join(slices).replace(b"],[", b"\n")
    pairs = pl.read_csv(io.BytesIO(text), has_header=False, schema={"t": pl.Float64, "value": pl.Float64})
    if pairs.height != total:
        return None
    sid = np.repeat(np.arange(len(metrics), dtype=np.uint32), counts)
    samples = pairs.select(
        pl.Series("sid", sid),
        (pl.col("t") * 1_000_000).round().cast(pl.Int64).cast(TS_TYPE).alias("ts"),
        "value",
    )
    return Matrix(series, samples)


def parse_matrix(body: bytes, labels: Sequence[str], what: str) -> Matrix:
    """Parse a `query_range` answer, keeping only `labels` from each series' label set."""
    try:
        fast = _split_matrix(body, labels)
    except pl.exceptions.PolarsError:
        fast = None
    if fast is not None:
        return fast
    try:
        frame = pl.read_json(io.BytesIO(body), schema=_schema(labels))
    except (pl.exceptions.PolarsError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(f"answer to {what} is not a Prometheus matrix ({first})") from None
    if frame.height != 1 or frame["status"][0] != "success":
        raise SourceError(f"answer to {what}: {frame['error'][0] if frame.height else 'empty body'}")
    try:
        return _read_result(frame, labels, what)
    except pl.exceptions.PolarsError as exc:  # a shape the checks below did not foresee
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(f"answer to {what} is not a Prometheus matrix ({first})") from None


def _read_result(frame: pl.DataFrame, labels: Sequence[str], what: str) -> Matrix:
    """The fallback's result list as a Matrix; every sample must be `[time, "value"]` with a
    finite time and a value Prometheus can write (a number, `NaN`, `±Inf`): anything else is
    one line naming the query and the first bad sample, never a guess."""
    result = frame.select(pl.col("data").struct.field("result")).explode("result")
    result = result.filter(pl.col("result").is_not_null()).unnest("result")
    if result.height == 0:
        return empty_matrix(labels)
    result = result.with_row_index("sid")
    metric = result.select("sid", pl.col("metric")).unnest("metric") if labels else result.select("sid")
    # Empty strings and absent labels mean the same thing in Prometheus: make both null.
    series = metric.with_columns(
        [pl.when(pl.col(name) == "").then(None).otherwise(pl.col(name)).alias(name) for name in labels]
    )
    pairs = result.select("sid", pl.col("values")).explode("values").drop_nulls("values")
    parsed = pairs.with_columns(
        pl.col("values").list.len().alias("_n"),
        pl.col("values").list.get(0, null_on_oob=True).cast(pl.Float64, strict=False).alias("_t"),
        pl.col("values").list.get(1, null_on_oob=True).cast(pl.Float64, strict=False).alias("value"),
    )
    bad = parsed.filter((pl.col("_n") != 2) | pl.col("_t").is_null() | ~pl.col("_t").is_finite()
                        | pl.col("value").is_null())
    if bad.height:
        raise SourceError(f"answer to {what} is not a Prometheus matrix: {bad.height} sample(s) are "
                          f"not [time, \"value\"] (first: {bad['values'][0].to_list()!r})")
    samples = parsed.select(
        "sid", (pl.col("_t") * 1_000_000).round().cast(pl.Int64).cast(TS_TYPE).alias("ts"), "value")
    return Matrix(series, samples)


def sample_spacing(matrix: Matrix, fallback: timedelta) -> timedelta:
    """How long one raw sample of these series stands: the median interval between a series'
    consecutive samples (the scrape interval), or `fallback` when no series has two.

    Why: "last instant seen + one step" made a pod's span depend on the query step (a 15 s
    step over 60 s scrapes ended each pod 45 s early, and each chunk's span stopped short of
    the next chunk's first sample; a 120 s step over 30 s scrapes ran 90 s late): the bill
    moved with `prometheus.step` (issue 31 item 8). DCGM rows stand until the card's next
    scrape (the sampling model); a pod's last raw sample stands for its series' scrape
    interval the same way, whatever the step."""
    if matrix.samples.height < 2:
        return fallback
    gaps = (matrix.samples.sort("sid", "ts")
            .select(pl.col("ts").diff().over("sid").dt.total_microseconds().alias("us"))
            .filter(pl.col("us") > 0)["us"])
    if gaps.len() == 0:
        return fallback
    median = gaps.median()
    assert isinstance(median, (int, float))
    return timedelta(microseconds=round(median))


STALENESS = timedelta(microseconds=STALENESS_US)
"""The longest gap between two raw samples of one key that a run bridges: the sampling model's
staleness bound (Prometheus' default lookback delta, 5 minutes)."""


def sample_runs(frame: pl.DataFrame, keys: Sequence[str], spacing: timedelta) -> pl.DataFrame:
    """Per `keys`, the runs of the sample times `ts` in `frame` (one row per key and time), each
    `start_ts` (its first sample) to `end_ts` (its last sample plus `spacing`, the series' scrape
    interval, `sample_spacing`); a gap longer than the staleness bound (or `spacing`, if longer)
    between two samples opens a new run. Nothing here depends on the query step: read from raw
    samples (`promql.raw_samples`), a run starts and ends where the scrapes do (decision 0212,
    the rule 0183 gave the pod history)."""
    keys = list(keys)
    return (
        number_runs(frame.select(*keys, "ts").unique(), keys, spacing)
        .group_by(*keys, "_run")
        .agg(pl.col("ts").min().alias("start_ts"), (pl.col("ts").max() + spacing).alias("end_ts"))
        .drop("_run")
    )


def number_runs(frame: pl.DataFrame, keys: Sequence[str], spacing: timedelta) -> pl.DataFrame:
    """`frame` sorted by `keys` and `ts`, with `_run` numbering each key's runs (`sample_runs`:
    a gap longer than the staleness bound, or `spacing` if longer, opens a new one)."""
    keys = list(keys)
    gap = max(spacing, STALENESS)
    ordered = frame.sort([*keys, "ts"], nulls_last=True).with_columns(
        (pl.col("ts").diff().over(keys) > gap).fill_null(True).cast(pl.Int32).alias("_opened"))
    return ordered.with_columns(pl.col("_opened").cum_sum().over(keys).alias("_run")).drop("_opened")


def merge_replicas(matrix: Matrix, replica_labels: Sequence[str] = REPLICA_LABELS) -> tuple[Matrix, int]:
    """HA copies (series equal but for `replica_labels`) become one series; returns it and the
    number of copies' samples dropped (the caller counts them as `ha_duplicate`).

    Why: each replica of an HA pair stores every series, so reading both would count every
    sample twice; reading one would lose the other's samples where the first had a gap. So
    the copies' samples move to the copy with the lowest sid, and at an instant both replicas
    answered one sample is kept (the lowest original sid's). Only series whose copies differ in
    a replica label merge: two series that differ in a label we do not read (two scrape jobs)
    stay two, for the caller's `duplicate_series` rule. The replica columns are dropped and the
    series renumbered 0..k-1.
    """
    series, samples = matrix.series, matrix.samples
    present = [r for r in replica_labels if r in series.columns]
    if not present or series.height == 0:
        return Matrix(series.drop(present), samples), 0
    identity = [c for c in series.columns if c not in ("sid", *present)]
    replica = pl.concat_str(*(pl.col(r).fill_null("") for r in present), separator="\x00")
    copies = replica.n_unique().over(identity) > 1  # same series, answered by >1 replica
    first = pl.col("sid").min().over(identity)
    canon = series.select("sid", pl.when(copies).then(first).otherwise(pl.col("sid")).alias("canon"))
    if canon.filter(pl.col("sid") != pl.col("canon")).height == 0:
        return Matrix(series.drop(present), samples), 0
    series = series.filter(pl.col("sid") == canon["canon"]).drop(present)
    # Renumber densely (sid = 0..k-1, as `parse_matrix` gives), so callers may offset by height.
    dense = np.zeros(int(canon["sid"].to_numpy().max()) + 1, dtype=np.int64)
    dense[series["sid"].to_numpy()] = np.arange(series.height)
    canon_of = np.zeros_like(dense)
    canon_of[canon["sid"].to_numpy()] = dense[canon["canon"].to_numpy()]
    series = series.with_columns(pl.Series("sid", dense[series["sid"].to_numpy()]).cast(series["sid"].dtype))
    ordered = samples.sort("sid", maintain_order=True)  # the lowest original sid first
    moved = ordered.with_columns(
        pl.Series("sid", canon_of[ordered["sid"].to_numpy()]).cast(samples["sid"].dtype))
    kept = moved.unique(["sid", "ts"], keep="first", maintain_order=True)
    return Matrix(series, kept), moved.height - kept.height


def merge_replica_fields(
    matrices: Mapping[str, Matrix], replica_labels: Sequence[str], quality: Quality, table: str,
) -> dict[str, Matrix]:
    """`merge_replicas` for each field's answer, the copies counted `ha_duplicate` per field."""
    merged: dict[str, Matrix] = {}
    for name, matrix in matrices.items():
        merged[name], copies = merge_replicas(matrix, replica_labels)
        quality.add(table, name, "ha_duplicate", copies)
    return merged
