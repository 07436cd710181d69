"""Terminal progress lines for the CLI's long steps: one updating line on a terminal, plain
lines otherwise (logs, CI)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`with Progress("simulating", total=31) as p: p.advance()` prints `[step] label n/total`."""

    def __init__(self, label: str, total: int, out: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        # Resolved per call, never at import: a stream bound at import time outlives whatever
        # replaced `sys.stderr` then (a test's capture, a redirected CLI run).
        self.out = out if out is not None else sys.stderr
        self.tty = self.out.isatty()
        self.started = time.perf_counter()
        self._last_plain = -1

    def __enter__(self) -> Progress:
        self._render()
        return self

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self._render(note)

    def _render(self, note: str = "") -> None:
        elapsed = time.perf_counter() - self.started
        text = f"  {self.label}: {self.done}/{self.total} ({elapsed:.1f}s){' ' + note if note else ''}"
        if self.tty:
            self.out.write("\r\x1b[2K" + text)
            self.out.flush()
            return
        # Plain output (logs, CI): a line every ~10% so long steps show life without flooding.
        tenth = self.done * 10 // max(self.total, 1)
        if tenth != self._last_plain or self.done == self.total:
            self._last_plain = tenth
            print(text, file=self.out, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()
