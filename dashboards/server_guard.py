"""The production server's limits on slow and idle clients: the gunicorn worker `serve` runs.

Why a worker class of our own: gunicorn's gthread worker hands a connection to one of its few
threads (`threads`, 8) as soon as any byte arrives, and the thread then blocks reading the rest
of the request with no deadline; eight connections that send half a request line hold every
thread, and every legitimate request waits (issue 31: 170 s+). At `worker_connections` it stops
accepting, so the 65th client hangs in the kernel's backlog until it times out instead of being
told the server is busy. gunicorn has settings for the sizes (`limit_request_line`,
`limit_request_fields`, `limit_request_field_size`, `worker_connections`, `backlog`,
`keepalive`) but none for the time a request's header may take. So, as the development
server does (`dashboards.app.BoundedWSGIServer`: 64 connections, a 30 s stall timeout):

- a request's header is read on the worker's event loop, never on a thread: the bytes that
  arrive are buffered until the blank line that ends the header, and only a complete header is
  handed to a thread (with the bytes put back in front of gunicorn's own parser). A connection
  whose header is not complete within `header_timeout_s` of its first wait is closed, so idle
  and slow sockets cost a file descriptor, never a thread. The deadline is fixed when the wait
  starts: bytes that trickle in never move it. A kept-alive connection's next request waits
  the same way, also when the client pipelined the start of it behind the previous one (those
  bytes are taken back from gunicorn's parser and awaited on the loop);
- past `worker_connections` open connections a new one is answered `503` with `Retry-After`
  and closed at once (the listener is never switched off);
- on a thread, each socket read or write that stalls for `stall_timeout_s` ends the connection
  (a body that never comes, a client that never reads its answer).
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import time
from functools import partial
from typing import Any

from gunicorn.http import get_parser
from gunicorn.workers.gthread import TConn, ThreadWorker

HEADER_END = b"\r\n\r\n"
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 5\r\n"
        b"Connection: close\r\nContent-Length: 36\r\n\r\n503 Service Unavailable: server busy\n")


class _StallSocket:
    """A client socket whose blocking mode has a stall timeout: gunicorn switches its sockets to
    blocking (`setblocking(True)`, no timeout) before reading on a thread; here that becomes
    `settimeout(stall_s)`, and a read that times out reads as end of stream (the parser's
    "client went away", logged at debug, the connection closed)."""

    def __init__(self, sock: socket.socket, stall_s: float) -> None:
        self._sock = sock
        self._stall_s = stall_s

    def setblocking(self, flag: bool) -> None:
        if flag:
            self._sock.settimeout(self._stall_s)
        else:
            self._sock.setblocking(False)

    def recv(self, size: int, *flags: int) -> bytes:
        try:
            return self._sock.recv(size, *flags)
        except TimeoutError:
            return b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class GuardedThreadWorker(ThreadWorker):
    """gthread with the limits of the module docstring (gunicorn builds it from `cfg`)."""

    header_timeout_s = 30.0
    stall_timeout_s = 30.0
    header_max_bytes = 65536
    """More than this without the blank line: handed to gunicorn's parser, which refuses it
    (`limit_request_line` / `limit_request_fields` / `limit_request_field_size`)."""

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(True)  # at the cap a client is told 503, never left hanging

    def accept(self, listener: Any) -> None:
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        if self.nr_conns >= self.worker_connections:
            _refuse(client)
            return
        self.nr_conns += 1
        client.setblocking(False)
        conn = TConn(self.cfg, _StallSocket(client, self.stall_timeout_s), address, listener.getsockname())
        self._await_header(conn, time.monotonic() + self.header_timeout_s)

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        """A kept-alive connection's next request: its header is awaited like a new one's."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._await_header(conn, time.monotonic() + self.header_timeout_s)

    def finish_request(self, conn: Any, fs: Any) -> None:
        """A request answered with keep-alive whose next request's header is already partly
        buffered (pipelined bytes gunicorn read ahead): gunicorn would hand it straight back to a
        thread, which then blocks on the rest of the header with no deadline; the partial header
        is awaited on the loop instead."""
        ahead = _read_ahead(conn, fs)
        if ahead and HEADER_END not in ahead and self.alive:
            conn.parser.unreader.take_buffered()
            conn.sock.setblocking(False)
            self._await_header(conn, time.monotonic() + self.header_timeout_s, ahead)
            return
        super().finish_request(conn, fs)

    def _await_header(self, conn: Any, deadline: float, header: bytes = b"") -> None:
        conn.timeout = deadline
        conn.header = header
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def on_pending_socket_readable(self, conn: Any, client: Any) -> None:
        """Read what arrived (never blocking); a complete header goes to a thread."""
        try:
            data = conn.sock.recv(self.header_max_bytes)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client closed (or reset) before finishing its header
            self._drop_pending(conn)
            return
        conn.header += data
        if HEADER_END not in conn.header and len(conn.header) < self.header_max_bytes:
            return
        self.poller.unregister(client)
        self.pending_conns.remove(conn)
        if conn.parser is None:
            conn.parser = get_parser(self.cfg, conn.sock, conn.client)
        conn.parser.unreader.unread(conn.header)
        conn.header = b""
        conn.data_ready = True
        self.enqueue_req(conn)

    def _drop_pending(self, conn: Any) -> None:
        with contextlib.suppress(OSError, KeyError, ValueError):
            self.poller.unregister(conn.sock)
        self.pending_conns.remove(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """Close every pending connection past its deadline (deadlines differ: a deferred one
        waits `keepalive`, a header `header_timeout_s`, so the queue is not in deadline order)."""
        now = time.monotonic()
        for conn in [c for c in self.pending_conns if c.timeout <= now]:
            self._drop_pending(conn)


def _read_ahead(conn: Any, fs: Any) -> bytes:
    """The bytes of the next request gunicorn's parser holds after a kept-alive answer (b"" when
    the request failed, was deferred or closed the connection)."""
    if fs.cancelled() or fs.exception() is not None or fs.result() is not True or conn.parser is None:
        return b""
    return bytes(conn.parser.unreader.buf.getvalue())


def _refuse(client: socket.socket) -> None:
    """Best effort, never blocking: a full socket buffer just means the client sees a close."""
    try:
        client.setblocking(False)
        client.send(BUSY)
        client.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        client.close()


def worker_class(header_timeout_s: float, stall_timeout_s: float) -> type[GuardedThreadWorker]:
    """The worker class with these limits (gunicorn instantiates it in the forked worker)."""
    return type("GuardedThreadWorker", (GuardedThreadWorker,), {
        "header_timeout_s": header_timeout_s, "stall_timeout_s": stall_timeout_s})
