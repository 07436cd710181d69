"""Shared helpers of the hardening suite: run the real CLI in-process and read what it said.

`run_cli` is session-scoped (Hypothesis re-runs a test body many times and must not reuse a
function-scoped fixture); it captures stdout and stderr with `contextlib` redirection.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "examples" / "whatif-fleet.yaml"
DEMAND = REPO / "examples" / "whatif-demand.yaml"


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    def assert_one_line_refusal(self, *, warehouse: Path | None = None) -> str:
        """Non-zero exit, exactly one `gpuledger: error:` line on stderr, no traceback, the
        error one of ours (not the top level's 'unexpected' net), and no warehouse written."""
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert self.code != 0, self
        assert len(lines) == 1 and lines[0].startswith("gpuledger: error: "), self
        assert "Traceback" not in self.err + self.out, self
        assert "unexpected" not in lines[0], self
        if warehouse is not None:
            assert not warehouse.exists(), f"{warehouse} was written"
        return lines[0]


def run(argv: Sequence[str]) -> CliResult:
    from gpuledger.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def run_cli() -> Callable[[Sequence[str]], CliResult]:
    return run
