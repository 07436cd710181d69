"""Staleness markers: a live-scraped Prometheus writes one when a series leaves a scrape; the
range query never returns it, so the remote read must drop it too (by its bit pattern).

A real Prometheus scrapes, every second, a target whose one GPU changes pod every 3 seconds,
so each old series ends with a stale marker. The window is then read by both paths at a 1 s
step: the remote read's chunks hold stale markers (checked on the decoded chunks themselves),
and the frames and quality counts equal the query path's (a kept marker would be a NaN reading).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import requests

from gpuledger.collectors import remote_read, xor_chunks
from gpuledger.collectors.prometheus import PrometheusCollector
from gpuledger.core.config import Settings
from gpuledger.core.window import Window, floor_time
from tools.metrics_servers import ServerPool

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

STEP = timedelta(seconds=1)


@pytest.fixture
def churning_target() -> Iterator[str]:
    """A /metrics target: one GPU whose pod changes every 3 s (host:port)."""

    class Target(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            pod = f"job-{int(time.time() // 3)}"
            body = ("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
                    f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-s0",gpu="0",modelName="NVIDIA H100 80GB HBM3",'
                    f'Hostname="live-node",namespace="ml-a",pod="{pod}",container="main"}} 50\n').encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _stale_markers(url: str, window: Window) -> int:
    body = remote_read.request_body([(int(window.start.timestamp() * 1000), int(window.end.timestamp() * 1000),
                                      [("__name__", "=", "DCGM_FI_DEV_GPU_UTIL")])])
    answer = requests.post(url + "/api/v1/read", data=body, headers=remote_read.HEADERS, timeout=30)
    answer.raise_for_status()
    chunks = remote_read.read_frames(answer.content, "test").chunks
    bits = xor_chunks.decode(chunks).value_bits
    return int((bits == np.uint64(remote_read.STALE_NAN_BITS)).sum())


def test_stale_markers_are_not_samples(metrics_servers: ServerPool, churning_target: str) -> None:
    prom = metrics_servers.scraping_prometheus([churning_target], interval="1s")
    first = prom.first_scrape()
    assert first is not None, "Prometheus never scraped the target"
    start = floor_time(datetime.fromtimestamp(first, UTC), STEP) + 2 * STEP
    window = Window(start, start + 12 * STEP, STEP)
    while datetime.now(UTC) < window.end + 3 * STEP:
        time.sleep(0.5)
    assert _stale_markers(prom.url, window) >= 2  # the pod changed at least twice

    def read(path: str) -> list[object]:
        settings = Settings(prometheus={"step": "1s", "chunk": "6s", "retries": 0, "read_path": path})
        with PrometheusCollector(prom.url, settings, namespaces_from_metrics=False) as collector:
            chunks = list(collector.iter_chunks(window))
            assert collector.read_path == path
            return [(c.frames["gpu_samples"], dict(c.quality.counts)) for c in chunks]

    query, bulk = read("query_range"), read("remote_read")
    assert sum(frame.height for frame, _ in query) >= 8
    for (q_frame, q_counts), (b_frame, b_counts) in zip(query, bulk, strict=True):
        assert q_frame.equals(b_frame)
        assert q_counts == b_counts
