"""Which read the collector uses for raw DCGM series, and the two bulk reads themselves.

`prometheus.read_path` (docs/decisions/0124):
- `auto` (default): VictoriaMetrics' `/api/v1/export` where the engine serves it, else
  Prometheus' streamed remote read (`/api/v1/read`) where it answers with streamed chunks,
  else `query_range`. Each is probed once per collector with a read of a series that cannot
  exist; an HTTP refusal (404, 400, 405, a wrong content type) means "not served here" and
  the next is tried; an engine that cannot be reached raises as any request would.
- `export`, `remote_read`: that path or one clear error (no silent fallback when forced).
- `query_range`: the PromQL path only (what every Prometheus-compatible engine serves).

A bulk read returns raw samples per (node shard, time chunk) for all DCGM fields at once, and
`bulk_align` turns them into the per-(field, shard) `Matrix` the query path would have parsed,
so everything after the read (HA merge, renames, screening, duplicates) is shared.
Only the raw DCGM series take this path: the other reads are aggregations (`sum by`), tiny, or
instant queries, where PromQL is the right tool.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from gpuledger.collectors import remote_read, vm_export
from gpuledger.collectors.bulk_align import RawRead, align, span_ms
from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_http import PromHttp
from gpuledger.collectors.prom_parse import Matrix
from gpuledger.collectors.promql import NODE_LABELS, Shard, regex_any, selector
from gpuledger.core.errors import SourceError

PROBE_METRIC = "gpuledger_read_path_probe"
"""A metric name no exporter writes: the probes' answers are empty wherever they are served."""
PATHS = ("auto", "query_range", "remote_read", "export")


def shard_matchers(shard: Shard) -> list[tuple[str, str, str]]:
    """The shard's selector (`Shard.matcher`) as (label, op, value) matchers."""
    if shard.label is None:
        return [(name, "=", "") for name in NODE_LABELS]
    return [(shard.label, "=~", regex_any(shard.nodes))]


class BulkRead:
    """A raw-sample read of one engine; `read` gives the query path's matrices."""

    kind = "bulk"
    left_open = True

    def __init__(self, http: PromHttp) -> None:
        self.http = http

    def fetch(self, chunk: Chunk, shard: Shard, metrics: Sequence[str]) -> tuple[bytes, str]:
        raise NotImplementedError

    def parse(self, body: bytes, metrics: Sequence[str], what: str) -> RawRead:
        raise NotImplementedError

    def read(self, chunk: Chunk, shard: Shard, fields: Mapping[str, str], labels: Sequence[str],
             ) -> tuple[dict[str, Matrix], int, float]:
        """{column: Matrix} for the DCGM `fields` (metric → column) of one shard and chunk,
        the answer's size and the seconds spent waiting for it."""
        metrics = list(fields)
        started = time.perf_counter()
        body, what = self.fetch(chunk, shard, metrics)
        waited = time.perf_counter() - started
        matrices = align(self.parse(body, metrics, what), chunk, len(metrics), labels,
                         left_open=self.left_open)
        return {fields[m]: matrix for m, matrix in zip(metrics, matrices, strict=True)}, len(body), waited


class RemoteRead(BulkRead):
    """Prometheus' `/api/v1/read`, streamed XOR chunks (`remote_read`)."""

    kind = "remote_read"

    def __init__(self, http: PromHttp, *, major_version: int) -> None:
        super().__init__(http)
        self.left_open = major_version >= 3  # Prometheus 3 made ranges left-open
        self.label_sets = remote_read.LabelSets()

    def fetch(self, chunk: Chunk, shard: Shard, metrics: Sequence[str]) -> tuple[bytes, str]:
        lo, hi = _wide(span_ms(chunk))
        what = f"remote read of {len(metrics)} DCGM fields ({shard}) for {_span(chunk)}"
        queries = [(lo, hi, [("__name__", "=", m), *shard_matchers(shard)]) for m in metrics]
        response = self.http.send("/api/v1/read", what, body=remote_read.request_body(queries),
                                  headers=remote_read.HEADERS)
        if response.status_code != 200:
            raise self.http.refused(response, what)
        if not response.headers.get("Content-Type", "").startswith(remote_read.STREAMED_TYPE):
            raise SourceError(self.http.redact(f"{self.http.shown_url}: {what}: not a streamed answer"))
        return response.content, what

    def parse(self, body: bytes, metrics: Sequence[str], what: str) -> RawRead:
        return remote_read.parse_stream(body, what, self.label_sets)


class Export(BulkRead):
    """VictoriaMetrics' `/api/v1/export` JSON lines (`vm_export`)."""

    kind = "export"

    def fetch(self, chunk: Chunk, shard: Shard, metrics: Sequence[str]) -> tuple[bytes, str]:
        lo, hi = _wide(span_ms(chunk))
        what = f"export of {len(metrics)} DCGM fields ({shard}) for {_span(chunk)}"
        form: dict[str, str | list[str]] = {
            "match[]": [selector(m, shard.matcher()) for m in metrics],
            "start": f"{lo / 1000:.3f}", "end": f"{hi / 1000:.3f}"}
        return self.http.post("/api/v1/export", form, what), what

    def parse(self, body: bytes, metrics: Sequence[str], what: str) -> RawRead:
        return vm_export.parse_export(body, {m: i for i, m in enumerate(metrics)}, what)


def choose(http: PromHttp, mode: str) -> BulkRead | None:
    """The bulk read to use (None: `query_range`); see the module docstring."""
    if mode == "query_range":
        return None
    if mode in ("auto", "export"):
        if _serves_export(http):
            return Export(http)
        if mode == "export":
            raise SourceError(f"{http.shown_url}: prometheus.read_path is export but the engine does "
                              "not serve /api/v1/export (not VictoriaMetrics?); use auto or query_range")
    if _serves_remote_read(http):
        return RemoteRead(http, major_version=_major_version(http))
    if mode == "remote_read":
        raise SourceError(f"{http.shown_url}: prometheus.read_path is remote_read but the engine does "
                          "not answer /api/v1/read with streamed chunks; use auto or query_range")
    return None


def _serves_export(http: PromHttp) -> bool:
    form = {"match[]": f'{{__name__="{PROBE_METRIC}"}}', "start": "0", "end": "1"}
    response = http.send("/api/v1/export", "probe of /api/v1/export", form=form, method="GET")
    return response.status_code == 200 and not response.content.strip()


def _serves_remote_read(http: PromHttp) -> bool:
    body = remote_read.request_body([(0, 1, [("__name__", "=", PROBE_METRIC)])])
    response = http.send("/api/v1/read", "probe of /api/v1/read", body=body, headers=remote_read.HEADERS)
    kind = response.headers.get("Content-Type", "")
    return response.status_code == 200 and kind.startswith(remote_read.STREAMED_TYPE)


def _major_version(http: PromHttp) -> int:
    """Prometheus' major version from its build info (2 where it does not say)."""
    response = http.send("/api/v1/status/buildinfo", "build info", method="GET")
    try:
        version = str(response.json()["data"]["version"])
        return int(version.split(".", maxsplit=1)[0])
    except (ValueError, KeyError, TypeError):
        return 2


def _wide(span: tuple[int, int]) -> tuple[int, int]:
    """A millisecond more on each side: whether an engine's ends are inclusive no longer
    matters (`bulk_align` drops what falls outside the chunk's steps)."""
    return span[0] - 1, span[1] + 1


def _span(chunk: Chunk) -> str:
    return f"{chunk.start.isoformat()} .. {chunk.end.isoformat()}"
