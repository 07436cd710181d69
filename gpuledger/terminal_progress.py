"""Progress on stderr for the CLI's long steps (rich), never on stdout.

- `busy(label)`: a spinner with the elapsed time that appears only when the step has run for
  more than `DELAY_S` (3 s) and stderr is a terminal: fast commands and pipes stay quiet.
- `Progress(label, total)`: a bar on a terminal; plain lines (about every 10 %) otherwise, so
  logs and CI show long steps alive without flooding.
- `RateProgress(label, total, unit)`: the same with a row count, rows/s and an ETA (what a
  backfill needs to tell a stuck run from a slow one); off a terminal a line per step at most
  every `PLAIN_EVERY_S` (and the last), each naming where a re-run would resume.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

DELAY_S = 3.0
PLAIN_EVERY_S = 10.0
WIDE = 120
"""Terminal columns from which `RateProgress` shows its note (watermark, roll-up) on the bar."""


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


class RateProgress:
    """`with RateProgress("collect", total=30, unit="chunks") as p: p.advance(rows=n, note=…)`.

    `total` may grow (`set_total`) when the work is only known once it starts."""

    def __init__(self, label: str, total: int, unit: str, out: TextIO | None = None,
                 plain_every_s: float = PLAIN_EVERY_S) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self.rows = 0
        self.out = out if out is not None else sys.stderr
        self.tty = self.out.isatty()
        self.plain_every_s = plain_every_s
        self.started = time.perf_counter()
        self._last_plain = float("-inf")
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> RateProgress:
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            console = _console(self.out)
            columns: list[Any] = [
                TextColumn("{task.description}"), BarColumn(bar_width=16), MofNCompleteColumn(),
                TextColumn(f"{self.unit} {{task.fields[rows]}} rows {{task.fields[rate]}}/s ETA"),
                TimeRemainingColumn()]
            if console.width >= WIDE:  # the note only where it fits beside the counts
                columns.append(TextColumn("{task.fields[note]}"))
            self._bar = RichProgress(*columns, console=console, transient=False)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, rows="0", rate="0", note="")
        return self

    def set_total(self, total: int) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def rate(self) -> float:
        return self.rows / max(time.perf_counter() - self.started, 1e-9)

    def eta_s(self) -> float | None:
        """Seconds left at the mean pace so far; None before the first step."""
        if not self.done:
            return None
        elapsed = time.perf_counter() - self.started
        return elapsed / self.done * max(self.total - self.done, 0)

    def advance(self, n: int = 1, *, rows: int = 0, note: str = "") -> None:
        self.done += n
        self.rows += rows
        if self._bar is not None:
            self._bar.update(self._task, advance=n, rows=f"{self.rows:,}", rate=f"{self.rate():,.0f}",
                             note=note)
            return
        now = time.perf_counter()
        if now - self._last_plain >= self.plain_every_s or self.done >= self.total:
            self._last_plain = now
            eta = self.eta_s()
            print(f"  {self.label}: {self.done}/{self.total} {self.unit}, {self.rows:,} rows "
                  f"({self.rate():,.0f} rows/s), {now - self.started:.1f}s"
                  f"{f', ETA {eta:.0f}s' if eta is not None and self.done < self.total else ''}"
                  f"{'; ' + note if note else ''}", file=self.out, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
