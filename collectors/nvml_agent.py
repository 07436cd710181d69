"""`gpuledger agent`: serve NVML readings on `/metrics` for nodes without DCGM.

Each scrape takes a fresh reading (so values are as current as the scrape) under a lock
(NVML handles are not shared across concurrent readings). `/healthz` answers 200 while NVML
answers. The server only reads the GPUs (see `nvml_read`).
"""

from __future__ import annotations

import http.server
import socket
import threading
from typing import Any

from gpuledger.collectors.nvml_exporter import PodResolver, render
from gpuledger.collectors.nvml_read import NvmlReader


class Agent:
    """An HTTP server around an `NvmlReader`; `start()` serves in a thread, `stop()` ends it."""

    def __init__(self, nvml: Any, host: str = "0.0.0.0", port: int = 9400, *,
                 hostname: str | None = None, resolver: PodResolver | None = None) -> None:
        self.reader = NvmlReader(nvml)
        self.hostname = hostname or socket.gethostname()
        self.resolver = resolver
        self._lock = threading.Lock()
        agent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/metrics":
                    body = agent.metrics().encode()
                    ctype = "text/plain; version=0.0.4; charset=utf-8"
                elif self.path == "/healthz":
                    body, ctype = b"ok\n", "text/plain"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, port), Handler)
        self.port = int(self.server.server_address[1])
        self._thread: threading.Thread | None = None

    def metrics(self) -> str:
        with self._lock:
            reading = self.reader.read()
        return render(reading, self.hostname, self.resolver)

    def start(self) -> Agent:
        self._thread = threading.Thread(target=self.server.serve_forever, name="nvml-agent", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.reader.close()
