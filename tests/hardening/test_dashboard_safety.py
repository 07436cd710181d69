"""The dashboard is safe to expose (issue 22, item 5), over real HTTP against the served app
(`dashboards.app.start_server` on a loopback port, raw sockets where a client would misbehave).

Cases:
- every answer (a page, `/healthz`, a 401, the CSV download) carries `X-Frame-Options: DENY`,
  CSP `frame-ancestors 'none'` and `X-Content-Type-Options: nosniff`;
- a POST announcing 251 MB is answered 413 at once, before its body is sent, even anonymously,
  and the connection is closed;
- a chunked body (no Content-Length, size unknown until read) is refused with 411 unread;
- the CSV route refuses a `team` or `model` that would inject a second `filename=` or a line
  break (400), and still serves a valid team with one `filename=`;
- connections are bounded: past `max_connections` a new connection is answered 503 and closed;
  an idle connection is closed by the server after its timeout.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from gpuledger.dashboards.app import RunningServer, create_app, start_server
from gpuledger.dashboards.http_guards import MAX_REQUEST_BYTES
from gpuledger.warehouse import Warehouse
from tests.dashboards.conftest import admin_headers, settings_with_roles

FRAMING = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff"}


def _app(tmp_path: Path) -> Any:
    path = tmp_path / "wh.duckdb"
    with Warehouse.open(path):
        pass
    return create_app(settings_with_roles(), path, background=False, cache_dir=tmp_path / "cache")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RunningServer]:
    running = start_server(_app(tmp_path))
    yield running
    running.stop()


def _raw(running: RunningServer, head: str, body: bytes = b"", *, timeout_s: float = 10.0) -> bytes:
    """Send `head` (and `body`) on a fresh connection; return the server's whole answer (its
    headers and Content-Length bytes of body)."""
    with socket.create_connection((running.host, running.port), timeout=timeout_s) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        return _read_response(sock)


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


def _read_until_closed(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# 1. Headers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "headers", "status"), [
    ("/", admin_headers(), 200),
    ("/healthz", {}, 200),
    ("/", {}, 401),
    ("/download/bill.csv?period=2026-11", admin_headers(), 200),
], ids=["page", "healthz", "unauthenticated", "csv"])
def test_every_answer_refuses_framing(served, path, headers, status):
    response = requests.get(served.url + path, headers=headers, timeout=30)
    assert response.status_code == status
    for name, value in FRAMING.items():
        assert response.headers.get(name) == value, name


# 2. Request size ----------------------------------------------------------------------------------
def test_huge_post_is_refused_before_its_body_is_read(served):
    head = ("POST /_dash-update-component HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {251 * 1000 * 1000}\r\n")
    answer = _raw(served, head, b'{"output": "')  # only 12 of 251 MB are ever sent
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert f"at most {MAX_REQUEST_BYTES} bytes".encode() in answer


def test_chunked_body_is_refused_unread(served):
    size = MAX_REQUEST_BYTES + 4096
    chunk = b"%x\r\n" % size + b"x" * size + b"\r\n0\r\n\r\n"
    head = ("POST /_dash-update-component HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in admin_headers().items()))
    answer = _raw(served, head, chunk)
    assert answer.startswith(b"HTTP/1.1 411"), answer[:200]


# 3. Values that reach a header --------------------------------------------------------------------
@pytest.mark.parametrize("query", [
    'team=nlp";filename="evil.exe',
    "team=nlp%22%3B%20filename%3D%22evil.exe",
    "model=H100%0d%0aSet-Cookie:%20x=1",
    "team=" + "a" * 64,
], ids=["quote", "quote-encoded", "crlf", "too-long"])
def test_download_refuses_header_breaking_names(served, query):
    response = requests.get(f"{served.url}/download/bill.csv?period=2026-11&{query}",
                            headers=admin_headers(), timeout=30)
    assert response.status_code == 400, response.headers.get("Content-Disposition")
    assert "Set-Cookie" not in response.headers


def test_download_of_a_valid_team_names_one_file(served):
    response = requests.get(f"{served.url}/download/bill.csv?period=2026-11&team=nlp",
                            headers=admin_headers(), timeout=30)
    assert response.status_code == 200
    disposition = response.headers["Content-Disposition"]
    assert disposition == 'attachment; filename="gpuledger-bill-2026-11-nlp.csv"'


# 4. Connections -----------------------------------------------------------------------------------
def test_connections_past_the_bound_get_503(tmp_path):
    running = start_server(_app(tmp_path), max_connections=2, timeout_s=20)
    held = [socket.create_connection((running.host, running.port), timeout=10) for _ in range(2)]
    try:
        answer = _raw(running, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    finally:
        for sock in held:
            sock.close()
        running.stop()


def test_idle_connection_is_closed_after_the_timeout(tmp_path):
    running = start_server(_app(tmp_path), timeout_s=1.0)
    try:
        with socket.create_connection((running.host, running.port), timeout=15) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # a stalled request line
            assert _read_until_closed(sock) == b""  # closed by the server, not by our timeout
    finally:
        running.stop()
