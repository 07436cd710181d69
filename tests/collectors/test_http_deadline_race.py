"""The deadline's timer against the headers, each order forced (collectors/http_deadline.py).

`threading.Timer.cancel` does not stop a timer that has already fired; on a loaded machine its
thread can run after the headers are in. Here the timer is replaced by one whose firing the test
chooses: during the header read (the deadline passed: `DeadlinePassed`, the socket shut down, the
response closed), or after the response was handed back (too late: the socket is left alone).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar, cast

import pytest

from gpuledger.collectors.http_deadline import DeadlinePassed, _within_deadline, deadline_for


class ChosenTimer:
    """A `threading.Timer` that never fires by itself; `fire()` runs its function."""

    made: ClassVar[list[ChosenTimer]] = []

    def __init__(self, interval: float, function: Callable[..., None], args: Any = ()) -> None:
        self.function, self.args = function, tuple(args)
        self.daemon = False
        ChosenTimer.made.append(self)

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        pass  # as a timer that had already fired: cancel cannot stop it

    def fire(self) -> None:
        self.function(*self.args)


class Socket:
    def __init__(self) -> None:
        self.shut = 0

    def shutdown(self, how: int) -> None:
        self.shut += 1


class Conn:
    def __init__(self) -> None:
        self.sock = Socket()


class Response:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def within(conn: Conn, read_headers: Callable[[], Response]) -> Any:
    """`_within_deadline` on the stand-ins (a connection and a response are all it touches)."""
    return _within_deadline(cast(Any, conn), cast(Any, read_headers))


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[ChosenTimer]:
    ChosenTimer.made = []
    monkeypatch.setattr(threading, "Timer", ChosenTimer)
    return ChosenTimer.made


def test_a_timer_that_fires_after_the_headers_leaves_the_connection_alone(timers: list[ChosenTimer]) -> None:
    conn, response = Conn(), Response()
    with deadline_for(time.monotonic() + 60):
        got = within(conn, lambda: response)
    assert got is response and len(timers) == 1
    timers[0].fire()  # the timer's thread, running late
    assert conn.sock.shut == 0 and not response.closed


def test_a_timer_that_fires_during_the_headers_cuts_them(timers: list[ChosenTimer]) -> None:
    conn, response = Conn(), Response()

    def read_headers() -> Response:
        timers[0].fire()  # the deadline passes while the headers are read; they parse as ended
        return response

    with deadline_for(time.monotonic() + 60), pytest.raises(DeadlinePassed):
        within(conn, read_headers)
    assert conn.sock.shut == 1 and response.closed


def test_a_read_failing_after_the_cut_is_the_deadline(timers: list[ChosenTimer]) -> None:
    conn = Conn()

    def read_headers() -> Response:
        timers[0].fire()
        raise ConnectionResetError("shut down under the read")

    with deadline_for(time.monotonic() + 60), pytest.raises(DeadlinePassed):
        within(conn, read_headers)


def test_a_read_failing_before_any_cut_is_its_own_error(timers: list[ChosenTimer]) -> None:
    def read_headers() -> Response:
        raise ConnectionResetError("reset by the peer")

    with deadline_for(time.monotonic() + 60), pytest.raises(ConnectionResetError):
        within(Conn(), read_headers)
