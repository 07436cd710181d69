"""Real metrics engines for tests: Debian's Prometheus and VictoriaMetrics on loopback ports.

- Prometheus with history: `promtool tsdb create-blocks-from openmetrics FILE DIR` writes TSDB
  blocks, then `prometheus` serves them (retention long enough to keep old blocks).
- Prometheus scraping: a config with static targets (e.g. the simulator's live `/metrics`).
- VictoriaMetrics: started empty, then the same OpenMetrics samples are pushed to
  `/api/v1/import/prometheus` (Prometheus text with millisecond timestamps) and flushed.

Every server runs in its own process group on a free 127.0.0.1 port and is stopped by its
fixture (and, as a last resort, at interpreter exit), so no process outlives the tests.

Pytest plugin fixtures:
- `metrics_servers` (session): a pool with `prometheus(openmetrics)`, `victoriametrics(openmetrics)`
  (cached per file, stopped at session end) and `scraping_prometheus(targets)`.
- `prometheus_factory` (function): start private Prometheus servers a test may stop itself.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import requests

READY_TIMEOUT_S = 60.0
_LIVE: set[MetricsServer] = set()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MetricsServer:
    """A running engine process; `url` is its HTTP API root."""

    def __init__(self, kind: str, argv: list[str], port: int, data_dir: Path, ready_path: str) -> None:
        self.kind = kind
        self.argv = argv
        self.port = port
        self.data_dir = data_dir
        self.url = f"http://127.0.0.1:{port}"
        self._ready_path = ready_path
        self.log_path = data_dir.parent / f"{kind}-{port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> MetricsServer:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        _LIVE.add(self)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"{self.kind} exited with {code}: {self.log_tail()}")
            try:
                if requests.get(self.url + self._ready_path, timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.kind} not ready on {self.url} in {READY_TIMEOUT_S}s: {self.log_tail()}")

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def first_scrape(self, timeout_s: float = 90.0, poll_s: float = 1.0) -> float | None:
        """When a scraping Prometheus first scraped a target up (epoch seconds), waiting for it:
        service discovery delays the first scrape. None when none came within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(poll_s)
            found = requests.get(f"{self.url}/api/v1/query", params={"query": "timestamp(up == 1)"},
                                 timeout=5).json()["data"]["result"]
            if found:
                return float(found[0]["value"][1])
        return None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Terminate the process group; kill it if it does not exit within 15 s."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.process = None
        _LIVE.discard(self)

    def restart(self) -> MetricsServer:
        self.stop()
        return self.start()


def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


atexit.register(_stop_all)


# 1. Prometheus ----------------------------------------------------------------------------
def _prometheus_config(path: Path, targets: Iterable[str], interval: str) -> None:
    lines = ["global:", f"  scrape_interval: {interval}", f"  evaluation_interval: {interval}"]
    target_list = list(targets)
    if target_list:
        lines += [
            "scrape_configs:",
            "  - job_name: live",
            "    honor_labels: true",
            f"    scrape_interval: {interval}",
            "    static_configs:",
            "      - targets: [" + ", ".join(f"'{t}'" for t in target_list) + "]",
        ]
    path.write_text("\n".join(lines) + "\n")


def backfill(openmetrics: Path, data_dir: Path, max_block: str = "24h") -> None:
    """Write TSDB blocks for an OpenMetrics file (`promtool tsdb create-blocks-from openmetrics`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics",
         f"--max-block-duration={max_block}", str(openmetrics), str(data_dir)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool backfill of {openmetrics} failed: {done.stderr[-2000:]}")


def start_prometheus(
    root: Path, *, openmetrics: Path | None = None, targets: Iterable[str] = (),
    scrape_interval: str = "1s",
) -> MetricsServer:
    """Start Prometheus with data under `root` (backfilled first when `openmetrics` is given)."""
    data = root / "prometheus-data"
    if openmetrics is not None and not data.exists():
        backfill(openmetrics, data)
    data.mkdir(parents=True, exist_ok=True)
    config = root / "prometheus.yml"
    _prometheus_config(config, targets, scrape_interval)
    port = free_port()
    argv = [
        "prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
        "--log.level=warn",
    ]
    return MetricsServer("prometheus", argv, port, data, "/-/ready").start()


# 2. VictoriaMetrics ------------------------------------------------------------------------
def openmetrics_to_import(lines: Iterable[str]) -> Iterator[str]:
    """OpenMetrics sample lines → Prometheus text lines with millisecond timestamps."""
    for raw in lines:
        line = raw.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.rpartition("}") if "}" in line else ("", "", line)
        parts = rest.split()
        if head:
            name_labels = head + "}"
            values = parts
        else:
            name_labels, values = parts[0], parts[1:]
        if len(values) >= 2:
            yield f"{name_labels} {values[0]} {round(float(values[1]) * 1000)}"
        elif values:
            yield f"{name_labels} {values[0]}"


def push_openmetrics(url: str, openmetrics: Path, batch_lines: int = 200_000) -> int:
    """Import an OpenMetrics file into VictoriaMetrics; returns the number of samples sent."""
    sent = 0
    batch: list[str] = []

    def flush() -> None:
        nonlocal sent
        if batch:
            body = ("\n".join(batch) + "\n").encode()
            response = requests.post(url + "/api/v1/import/prometheus", data=body, timeout=300)
            response.raise_for_status()
            sent += len(batch)
            batch.clear()

    with openmetrics.open() as handle:
        for line in openmetrics_to_import(handle):
            batch.append(line)
            if len(batch) >= batch_lines:
                flush()
    flush()
    requests.get(url + "/internal/force_flush", timeout=60).raise_for_status()
    return sent


def start_victoriametrics(root: Path, *, openmetrics: Path | None = None) -> MetricsServer:
    data = root / "vm-data"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [
        "victoria-metrics", f"-storageDataPath={data}", f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y", "-search.disableCache", "-loggerLevel=WARN",
        "-search.latencyOffset=0s",
    ]
    server = MetricsServer("victoriametrics", argv, port, data, "/health").start()
    if openmetrics is not None:
        push_openmetrics(server.url, openmetrics)
        time.sleep(1.0)  # VictoriaMetrics makes fresh samples searchable after ~1 s
    return server


# 3. Pytest fixtures ------------------------------------------------------------------------
class ServerPool:
    """Servers shared by a test session, cached per data file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[tuple[str, str], MetricsServer] = {}
        self._all: list[MetricsServer] = []

    def _dir(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        return path

    def prometheus(self, openmetrics: Path) -> MetricsServer:
        key = ("prometheus", str(openmetrics.resolve()))
        if key not in self._cache or not self._cache[key].running:
            self._cache[key] = self._track(start_prometheus(self._dir("prom"), openmetrics=openmetrics))
        return self._cache[key]

    def victoriametrics(self, openmetrics: Path) -> MetricsServer:
        key = ("victoriametrics", str(openmetrics.resolve()))
        if key not in self._cache or not self._cache[key].running:
            self._cache[key] = self._track(start_victoriametrics(self._dir("vm"), openmetrics=openmetrics))
        return self._cache[key]

    def scraping_prometheus(self, targets: Iterable[str], interval: str = "1s") -> MetricsServer:
        return self._track(start_prometheus(self._dir("scrape"), targets=targets, scrape_interval=interval))

    def _track(self, server: MetricsServer) -> MetricsServer:
        self._all.append(server)
        return server

    def stop_all(self) -> None:
        for server in self._all:
            server.stop()


def _require(binary: str) -> None:
    if shutil.which(binary) is None:
        pytest.fail(f"{binary} is not installed (Debian package; .ci/run installs it)")


@pytest.fixture(scope="session")
def metrics_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    for binary in ("prometheus", "promtool", "victoria-metrics"):
        _require(binary)
    pool = ServerPool(tmp_path_factory.mktemp("metrics-servers"))
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator[ServerPool]:
    """Private servers for one test (e.g. one it stops in the middle of a run)."""
    pool = ServerPool(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()
