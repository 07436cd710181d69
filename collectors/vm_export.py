"""VictoriaMetrics' `/api/v1/export` (JSON lines) read into raw sample arrays.

Why this export and not `/api/v1/export/native`: the native format is VictoriaMetrics' internal
block encoding (undocumented, versioned with the engine); the JSON-lines export is documented,
stable since 2019 and already compact (one line per series and data block, values and
timestamps as two arrays), so the labels go through `json` once per line and the numbers are
cut out of the bytes and read by Polars' CSV reader (Rust), as `prom_parse` does for range
answers: no Python loop over samples.

A line is `{"metric":{...},"values":[...],"timestamps":[...]}`; one series may come as several
lines (one per storage block): lines with the same label set are one series.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping

import numpy as np
import polars as pl

from gpuledger.collectors.bulk_align import RawRead
from gpuledger.core.errors import SourceError

_METRIC = b'{"metric":'
_VALUES = b',"values":['
_TIMES = b'],"timestamps":['


def parse_export(body: bytes, query_of_name: Mapping[str, int], what: str) -> RawRead:
    """JSON lines → RawRead; each series' query is found by its `__name__`."""
    labels: list[dict[str, str]] = []
    queries: list[int] = []
    sid_of: dict[bytes, int] = {}
    line_sid: list[int] = []
    counts: list[int] = []
    values: list[bytes] = []
    times: list[bytes] = []
    for line in body.split(b"\n"):
        if not line:
            continue
        at_values = line.find(_VALUES)
        at_times = line.find(_TIMES, at_values)
        if not line.startswith(_METRIC) or at_values < 0 or at_times < 0 or not line.endswith(b"]}"):
            raise SourceError(f"{what}: not a VictoriaMetrics export line ({line[:80]!r})")
        metric = line[len(_METRIC):at_values]
        sid = sid_of.get(metric)
        if sid is None:
            try:
                parsed = json.loads(metric)
            except ValueError:
                raise SourceError(f"{what}: unreadable labels in an export line ({metric[:80]!r})") from None
            sid = sid_of[metric] = len(labels)
            labels.append({str(k): str(v) for k, v in parsed.items()})
            queries.append(query_of_name.get(labels[-1].get("__name__", ""), -1))
        stamp = line[at_times + len(_TIMES):-2]
        if not stamp:
            continue
        line_sid.append(sid)
        counts.append(stamp.count(b",") + 1)
        values.append(line[at_values + len(_VALUES):at_times])
        times.append(stamp)
    total = sum(counts)
    if not total:
        empty = np.zeros(0, dtype=np.int64)
        return RawRead(labels, np.asarray(queries, dtype=np.int64), empty, empty.copy(), np.zeros(0))
    ts = _numbers(times, pl.Int64, what)
    value = _numbers(values, pl.Float64, what)
    if ts.size != total or value.size != total:
        raise SourceError(f"{what}: export line with unequal values and timestamps")
    sid_arr = np.repeat(np.asarray(line_sid, dtype=np.int64), counts)
    return RawRead(labels, np.asarray(queries, dtype=np.int64), sid_arr, ts, value)


def _numbers(parts: list[bytes], dtype: type[pl.DataType], what: str) -> np.ndarray:
    text = b"\n".join(parts).replace(b",", b"\n")
    try:
        column = pl.read_csv(io.BytesIO(text), has_header=False, schema={"x": dtype()})["x"]
    except pl.exceptions.PolarsError as exc:
        raise SourceError(f"{what}: unreadable numbers in an export ({str(exc).splitlines()[0]})") from None
    if column.null_count():
        raise SourceError(f"{what}: empty numbers in an export")
    return column.to_numpy()
