"""A real local HTTP server in front of a real Prometheus that answers range queries badly on
demand: empty, cut off, trickled, huge, or with malformed `values`.

Why a proxy and not a stub: the property "no sample lost once the source answers again" needs
the real engine's real answers once the fault ends, so every request the fault does not touch
is forwarded to Prometheus as it came. The fault applies to `/api/v1/query_range` only (the
reads that carry samples); label values, instant queries and probes pass through.

Faults (`Fault.kind`):
- `empty`: `{"status":"success","data":{"resultType":"matrix","result":[]}}` (what a query
  frontend answers during a transient outage);
- `partial`: the first `size` bytes of the real answer, then the connection closes;
- `trickle`: a 200 with a large Content-Length, then 64 bytes every 0.5 s;
- `trickle_headers`: the status line, then one header line growing by 64 bytes every 0.5 s
  (the headers never end, so a client's body reader never starts);
- `huge`: a well-formed matrix of `size` bytes, generated as it is sent (never held here);
- `values`: a matrix whose first series' `values` is `payload` (e.g. `"x"`, `[["a"]]`).
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

EMPTY = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
WHOLE_ANSWERS = ("empty", "values")
"""Faults answered whole (a status, headers and a body of the stated length)."""


@dataclass
class Fault:
    kind: str = "none"
    size: int = 0
    payload: str = '"x"'


class HostileProxy:
    """`url` forwards to `upstream` except while `fault.kind` is not `none` (range queries)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.fault = Fault()
        self.faulted = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, body: bytes | None) -> None:
                fault = proxy.fault
                try:
                    if self.path.startswith("/api/v1/query_range") and fault.kind != "none":
                        proxy.faulted += 1
                        # A whole answer keeps the connection open, as Prometheus does (closing it
                        # unannounced raced the client's next request on it: RemoteDisconnected
                        # under load); an answer the fault breaks ends it.
                        self.close_connection = fault.kind not in WHOLE_ANSWERS
                        proxy.serve_fault(self, fault, body)
                        return
                    self._pass(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _pass(self, body: bytes | None) -> None:
                request = urllib.request.Request(
                    proxy.upstream + self.path, data=body, method=self.command,
                    headers={k: v for k, v in self.headers.items()
                             if k.lower() in ("content-type", "accept")})
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        status, data, ctype = answer.status, answer.read(), answer.headers.get(
                            "Content-Type", "application/json")
                except urllib.error.HTTPError as exc:
                    status, data, ctype = exc.code, exc.read(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def serve_fault(self, handler: http.server.BaseHTTPRequestHandler, fault: Fault,
                    body: bytes | None) -> None:
        if fault.kind == "empty":
            _send(handler, EMPTY)
        elif fault.kind == "values":
            _send(handler, b'{"status":"success","data":{"resultType":"matrix","result":['
                  b'{"metric":{"__name__":"DCGM_FI_PROF_GR_ENGINE_ACTIVE","UUID":"GPU-x"},'
                  b'"values":' + fault.payload.encode() + b"}]}}")
        elif fault.kind == "partial":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(fault.size * 2 + 100))
            handler.end_headers()
            handler.wfile.write((EMPTY[:-3] + b'{"metric":{},"values":[[1,"1"]' * fault.size)[:fault.size])
        elif fault.kind == "trickle":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(10_000_000))
            handler.end_headers()
            _trickle(handler)
        elif fault.kind == "trickle_headers":
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: ")
            _trickle(handler)
        elif fault.kind == "huge":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()  # no length, no chunking: HTTP/1.0-style body to close
            for part in huge_matrix(fault.size):
                handler.wfile.write(part)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _trickle(handler: http.server.BaseHTTPRequestHandler) -> None:
    """64 bytes every 0.5 s for 30 s (bounded: the test's client must give up well before)."""
    stop = time.monotonic() + 30
    while time.monotonic() < stop:
        handler.wfile.write(b"a" * 64)
        handler.wfile.flush()
        time.sleep(0.5)


_PIECE = b"".join(b'[%d,"0.5"],' % (1_767_225_600 + 60 * i) for i in range(40_000))
"""About 1 MB of samples, built at import (not while a test traces allocations)."""


def huge_matrix(size: int) -> Iterator[bytes]:
    """A one-series matrix of about `size` bytes, in 1 MB pieces built once (the client must
    refuse it by its cap long before the end; the same piece repeated keeps serving fast)."""
    head = (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
            b'{"__name__":"DCGM_FI_PROF_GR_ENGINE_ACTIVE","UUID":"GPU-h"},"values":[')
    piece = _PIECE
    yield head
    sent = len(head)
    while sent < size:
        yield piece
        sent += len(piece)
    yield b'[1767225600,"0.5"]]}]}}'


def _send(handler: http.server.BaseHTTPRequestHandler, data: bytes) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
