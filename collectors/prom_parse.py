"""Prometheus JSON answers read straight into Polars (no Python loop over samples).

A range answer is `{"data": {"result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}`.
Polars' JSON reader gets an explicit schema naming only the labels the caller wants (others
are skipped), values arrive as strings (Prometheus writes `"NaN"`, `"+Inf"`) and are cast in
bulk. The result is two frames: one row per series (`sid` + labels) and one row per sample
(`sid`, `ts`, `value`), so label mapping runs once per series, not once per sample.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from core.errors import SourceError

TS_TYPE = pl.Datetime("us", "UTC")


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


def parse_matrix(body: bytes, labels: Sequence[str], what: str) -> Matrix:
    """Parse a `query_range` answer, keeping only `labels` from each series' label set."""
    try:
        frame = pl.read_json(io.BytesIO(body), schema=_schema(labels))
    except (pl.exceptions.PolarsError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SourceError(f"answer to {what} is not a Prometheus matrix ({first})") from None
    if frame.height != 1 or frame["status"][0] != "success":
        raise SourceError(f"answer to {what}: {frame['error'][0] if frame.height else 'empty body'}")
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
    samples = pairs.select(
        "sid",
        (pl.col("values").list.get(0).cast(pl.Float64) * 1_000_000).round().cast(pl.Int64)
        .cast(TS_TYPE).alias("ts"),
        pl.col("values").list.get(1).cast(pl.Float64).alias("value"),
    )
    return Matrix(series, samples)
