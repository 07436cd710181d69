"""A whole-request deadline that also covers the status line and the headers.

Why its own module: `requests`' `timeout` is per socket read, so a server that trickles its
headers a few bytes at a time never trips it, and the body reader (`prom_http._read_body`)
only starts once the headers are in. The one place that waits for them is urllib3's
`HTTPConnection.getresponse`; the connections here run it under a timer that shuts the socket
down when the request's deadline passes (a shutdown wakes a read blocked in another thread,
which a plain `close` does not). The deadline is per thread (`deadline_for`), set by the one
request primitive (`prom_http.PromHttp.send`) around each request, since each worker thread
has its own session.

`DeadlinePassed` is not an `OSError`: urllib3 retries read errors, and a request past its
deadline must end now, not be sent again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.response import HTTPResponse

_current = threading.local()


class DeadlinePassed(Exception):
    """The request's whole-request deadline passed before its headers were read."""


@contextlib.contextmanager
def deadline_for(at: float) -> Iterator[None]:
    """Requests sent by this thread inside the block must have their headers by `at`
    (`time.monotonic()`)."""
    _current.at = at
    try:
        yield
    finally:
        _current.at = None


def _within_deadline(conn: HTTPConnection, read_headers: Callable[[], HTTPResponse]) -> HTTPResponse:
    """`read_headers()` (urllib3's `getresponse`), cut off at this thread's deadline if any."""
    at: float | None = getattr(_current, "at", None)
    if at is None:
        return read_headers()
    remaining = at - time.monotonic()
    if remaining <= 0:
        raise DeadlinePassed
    cut = _Cut(conn)
    timer = threading.Timer(remaining, cut.shut_down)
    timer.daemon = True
    timer.start()
    try:
        response = read_headers()
    except Exception:
        if cut.settle():
            raise DeadlinePassed from None
        raise
    finally:
        timer.cancel()
    if cut.settle():  # a header block cut at the deadline can parse as ended (EOF ends it)
        response.close()
        raise DeadlinePassed
    return response


class _Cut:
    """Whichever comes first of the deadline's timer and the end of the headers wins, under one
    lock: `Timer.cancel` does not stop a timer that has already fired, and on a loaded machine
    its thread can run after the headers are in and the response handed back; it must then
    leave the socket alone (the body is still to be read, the connection goes back to the pool)."""

    def __init__(self, conn: HTTPConnection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._cut = False
        self._settled = False

    def shut_down(self) -> None:
        """The deadline passed: shut the socket down, unless the headers were read first."""
        with self._lock:
            if self._settled:
                return
            self._cut = True
            sock = self._conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def settle(self) -> bool:
        """The headers are read (or failed): the timer may no longer cut; True when it did."""
        with self._lock:
            self._settled = True
            return self._cut


class _HTTPConnection(HTTPConnection):
    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # as urllib3 declares it
        return _within_deadline(self, super().getresponse)


class _HTTPSConnection(HTTPSConnection):
    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # as urllib3 declares it
        return _within_deadline(self, super().getresponse)


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """requests' adapter (retries, pooling as configured) whose connections honour
    `deadline_for` while waiting for the headers."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
