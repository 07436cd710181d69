"""Issue 31 item 5: slow and idle sockets cannot take the production server down.

Against a real `gpuledger serve` process (gunicorn, one worker, 8 threads, as the chart runs
it), with raw sockets:
- 8 connections that send half a request line and stop: a legitimate request is still answered
  within seconds (today: every thread blocks reading the rest; 170 s+);
- 70 idle connections (past the 64-connection cap): the ones past the cap are answered 503 and
  closed at once, and a legitimate request is answered (503 or its page), never left to time out;
- a header trickled a byte at a time is cut off `--header-timeout-s` after the connection
  opened (the bytes never move the deadline), also when its first bytes were pipelined behind
  a kept-alive request (today: a thread reads it with a per-read timeout only, so the connection
  stays as long as the bytes keep coming);
- the ops port binds loopback when no `--metrics-host` and no `POD_IP` are given (not 0.0.0.0).

The trickle tests never poll: a client thread sends a byte every `TRICKLE_S` until the server
closes, while the test blocks in one `recv` whose timeout is the bound.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.dashboards.server import ServeOptions, default_ops_host, gunicorn_options
from tests.deploy.conftest import Served, serve

HEADERS = "X-Forwarded-User: ada\r\n"
HEADER_TIMEOUT_S = 4.0
TRICKLE_S = 0.2
SLACK_S = 2.5
"""The worker's loop closes expired connections at least once a second; the rest is load."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from tests.dashboards.conftest import build_demo_warehouse

    root = tmp_path_factory.mktemp("slow")
    app = serve(root / "srv", build_demo_warehouse(root / "demo.duckdb", gpus=8),
                extra=[f"--header-timeout-s={HEADER_TIMEOUT_S:g}"])
    yield app
    app.server.stop()


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


def _ask(port: int, timeout_s: float = 10.0) -> bytes:
    """A whole GET on a fresh connection: the first bytes of the answer (b"" if closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: x\r\n{HEADERS}Connection: close\r\n\r\n".encode())
        return sock.recv(64)


def test_partial_request_lines_do_not_block(served: Served) -> None:
    slow = [_connect(served.port) for _ in range(8)]
    try:
        for sock in slow:
            sock.sendall(b"GET /api/v1/bill?per")
        time.sleep(1.0)  # every slow socket's bytes have arrived before the legitimate request
        started = time.monotonic()
        answer = _ask(served.port)
        took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 ") and took < 5.0, (answer, took)
    finally:
        for sock in slow:
            sock.close()


def test_idle_sockets_past_the_cap_get_503(served: Served) -> None:
    idle = [_connect(served.port) for _ in range(70)]
    try:
        time.sleep(1.0)
        refused = 0
        for sock in idle[64:]:
            sock.settimeout(5)
            try:
                first = sock.recv(64)
            except TimeoutError:
                first = b"(no answer)"
            refused += first.startswith(b"HTTP/1.1 503")
        assert refused == 6
        started = time.monotonic()
        answer = _ask(served.port)
        assert answer.startswith((b"HTTP/1.1 503", b"HTTP/1.1 2", b"HTTP/1.1 4")), answer
        assert time.monotonic() - started < 5.0
    finally:
        for sock in idle:
            sock.close()
    time.sleep(0.5)
    assert _ask(served.port).startswith(b"HTTP/1.1 ")  # capacity comes back once they close


def _trickle(sock: socket.socket, sent: list[int]) -> None:
    """Send one header byte every `TRICKLE_S` (a header that never ends) until the server closes."""
    try:
        while True:
            sock.send(b"a")
            sent.append(1)
            time.sleep(TRICKLE_S)
    except OSError:
        return


def _closed_after(sock: socket.socket, started: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and the seconds from `started` to the close;
    one blocking read at a time, bounded by the header timeout plus slack."""
    sock.settimeout(HEADER_TIMEOUT_S + SLACK_S)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        return got, float("inf")
    return got, time.monotonic() - started


def test_trickled_header_is_cut_off_at_the_bound(served: Served) -> None:
    with _connect(served.port) as sock:
        started = time.monotonic()
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: x\r\n{HEADERS}X-Pad: ".encode())
        sent: list[int] = []
        threading.Thread(target=_trickle, args=(sock, sent), daemon=True).start()
        got, took = _closed_after(sock, started)
    assert got == b""  # closed without an answer: the header never ended
    assert HEADER_TIMEOUT_S - 0.1 <= took <= HEADER_TIMEOUT_S + SLACK_S, took
    assert len(sent) >= (HEADER_TIMEOUT_S - 1) / TRICKLE_S / 2, len(sent)  # it kept trickling


def test_pipelined_trickled_header_is_cut_off_at_the_bound(served: Served) -> None:
    with _connect(served.port) as sock:
        whole = f"GET /healthz HTTP/1.1\r\nHost: x\r\n{HEADERS}\r\n"
        started = time.monotonic()
        sock.sendall(f"{whole}GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ".encode())
        sent: list[int] = []
        threading.Thread(target=_trickle, args=(sock, sent), daemon=True).start()
        first = sock.recv(65536)  # the first answer: the next header's wait starts after it
        answered = time.monotonic()
        got, took = _closed_after(sock, answered)
        got = first + got
    assert got.startswith(b"HTTP/1.1 200") and got.count(b"HTTP/1.1 ") == 1, got[:200]
    assert answered - started < 10 and took <= HEADER_TIMEOUT_S + SLACK_S, (answered - started, took)
    assert len(sent) >= (HEADER_TIMEOUT_S - 1) / TRICKLE_S / 2, len(sent)


def test_ops_host_defaults_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_IP", raising=False)
    assert default_ops_host() == "127.0.0.1"
    assert gunicorn_options(ServeOptions(ops_port=9100))["bind"][1] == "127.0.0.1:9100"
    monkeypatch.setenv("POD_IP", "10.4.2.7")
    assert gunicorn_options(ServeOptions(ops_port=9100))["bind"][1] == "10.4.2.7:9100"
    assert gunicorn_options(ServeOptions(ops_port=9100, ops_host="0.0.0.0"))["bind"][1] == "0.0.0.0:9100"


def test_header_limits_are_gunicorn_settings() -> None:
    options = gunicorn_options(ServeOptions())
    assert options["limit_request_line"] == 8190 and options["limit_request_fields"] == 100
    assert options["worker_connections"] == 64 and options["worker_class"].header_timeout_s == 30.0


_ = Path  # the fixture's paths
