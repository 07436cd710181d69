"""Progress on stderr for the CLI's long steps (rich), never on stdout.

- `busy(label)`: a spinner with the elapsed time that appears only when the step has run for
  more than `DELAY_S` (3 s) and stderr is a terminal: fast commands and pipes stay quiet.
- `Progress(label, total)`: a bar on a terminal; plain lines (about every 10 %) otherwise, so
  logs and CI show long steps alive without flooding.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

DELAY_S = 3.0


def _console(out: TextIO) -> Any:
    from rich.console import Console

    return Console(file=out, stderr=out is sys.stderr, highlight=False)


@contextmanager
def busy(label: str, out: TextIO | None = None, delay_s: float = DELAY_S) -> Iterator[None]:
    """A spinner on stderr after `delay_s`, on a terminal only (resolved per call: a stream
    bound at import time would outlive a test's capture)."""
    stream = out if out is not None else sys.stderr
    if not stream.isatty():
        yield
        return
    status: list[Any] = []
    lock = threading.Lock()
    done = False

    def start() -> None:
        with lock:
            if not done:
                status.append(_console(stream).status(label))
                status[0].start()

    timer = threading.Timer(delay_s, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done = True
            timer.cancel()
            if status:
                status[0].stop()


class Progress:
    """`with Progress("simulating", total=31) as p: p.advance()`."""

    def __init__(self, label: str, total: int, out: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.out = out if out is not None else sys.stderr
        self.tty = self.out.isatty()
        self.started = time.perf_counter()
        self._last_plain = -1
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(console=_console(self.out), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        else:
            self._plain()
        return self

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(self._task, advance=n, description=f"{self.label} {note}".strip())
        else:
            self._plain(note)

    def _plain(self, note: str = "") -> None:
        tenth = self.done * 10 // max(self.total, 1)
        if tenth != self._last_plain or self.done == self.total:
            self._last_plain = tenth
            elapsed = time.perf_counter() - self.started
            print(f"  {self.label}: {self.done}/{self.total} ({elapsed:.1f}s){' ' + note if note else ''}",
                  file=self.out, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
