"""Parsing a Prometheus range answer: today's `prom_parse.parse_matrix` beside orjson (issue 33
item 6, docs/decisions/0184).

Run: `python -m bench.bench_prom_parse [--series 512] [--points 1440]`. One answer shaped as
Prometheus writes it (compact JSON, `[t,"v"]` pairs, ratios with two decimals like `0.51`) is
parsed, in the same
run, each way `--repeat` times, alternating which goes first:
1. `prom_parse`: today's reader (byte slicing + Polars' CSV reader);
2. `orjson`: `orjson.loads` of the whole body, then the same two frames (series labels, and
   sid/ts/value samples) built from the decoded lists, as a switch to it would have to.
Both results are compared for equality first. msgspec is timed too where it is installed (it
is not a dependency; the figure is `null` otherwise). Figures: median seconds per parse and
samples per second, with the machine facts.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from bench.common import write_result
from gpuledger.collectors.prom_parse import TS_TYPE, Matrix, parse_matrix

LABELS = ("UUID", "Hostname", "namespace", "pod")


def answer(series: int, points: int) -> bytes:
    parts = []
    t0 = 1_767_225_600
    for s in range(series):
        metric = (b'{"__name__":"DCGM_FI_PROF_GR_ENGINE_ACTIVE","UUID":"GPU-%d","Hostname":"node-%d",'
                  b'"namespace":"team-%d","pod":"pod-%d"}' % (s, s // 8, s % 13, s))
        values = b",".join(b'[%d,"%s"]' % (t0 + 60 * i, repr(round(((s + i) % 100) / 100, 2)).encode())
                           for i in range(points))
        parts.append(b'{"metric":' + metric + b',"values":[' + values + b"]}")
    return b'{"status":"success","data":{"resultType":"matrix","result":[' + b",".join(parts) + b"]}}"


def _frames(result: list[dict[str, Any]]) -> Matrix:
    counts = [len(item["values"]) for item in result]
    flat = [pair for item in result for pair in item["values"]]
    series = pl.DataFrame({"sid": pl.Series(range(len(result)), dtype=pl.UInt32),
                           **{name: [item["metric"].get(name) for item in result] for name in LABELS}})
    ts = np.fromiter((p[0] for p in flat), dtype=np.float64, count=len(flat))
    value = np.array([p[1] for p in flat], dtype=np.float64)
    samples = pl.DataFrame({
        "sid": np.repeat(np.arange(len(result), dtype=np.uint32), counts),
        "ts": pl.Series(np.round(ts * 1_000_000).astype(np.int64)).cast(TS_TYPE),
        "value": value,
    })
    return Matrix(series, samples)


def by_orjson(body: bytes) -> Matrix:
    import orjson

    return _frames(orjson.loads(body)["data"]["result"])


def by_msgspec(body: bytes) -> Matrix:
    import msgspec

    return _frames(msgspec.json.decode(body)["data"]["result"])


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=512)
    parser.add_argument("--points", type=int, default=1440)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    body = answer(args.series, args.points)
    today = parse_matrix(body, LABELS, "bench")
    readers: dict[str, Callable[[bytes], Matrix]] = {"prom_parse": lambda b: parse_matrix(b, LABELS, "bench"),
                                                     "orjson": by_orjson}
    try:
        import msgspec  # noqa: F401

        readers["msgspec"] = by_msgspec
    except ImportError:
        pass
    for name, read in readers.items():
        other = read(body)
        assert other.samples.equals(today.samples) and other.series.equals(today.series), name
    order = list(readers)
    medians: dict[str, list[float]] = {name: [] for name in readers}
    for turn in range(2):  # each reader goes first once
        for name in (order if turn == 0 else order[::-1]):
            read = readers[name]
            medians[name].append(_median(lambda read=read: read(body), args.repeat))  # type: ignore[misc]
    samples = args.series * args.points
    figures: dict[str, dict[str, Any] | None] = {
        name: {"median_s": round(min(m), 4), "samples_per_s": round(samples / min(m))}
        for name, m in medians.items()}
    if "msgspec" not in figures:
        figures["msgspec"] = None
    write_result("prom_parse", {"series": args.series, "points": args.points, "samples": samples,
                                "answer_mb": round(len(body) / 1e6, 1), "readers": figures})


if __name__ == "__main__":
    main()
