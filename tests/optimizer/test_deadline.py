"""The command deadline stays one time-limit line when it fires inside a DuckDB query.

DuckDB runs Python's signal handlers while it executes and replaces the handler's exception with
`RuntimeError('Query interrupted')`; under load a demo's optimize step ended with exit 70 that way.
The tests play DuckDB's part exactly (swallow the handler's error, raise its bare RuntimeError):
whether a given query checks for signals soon enough depends on its plan and the machine.
"""

from __future__ import annotations

import time

import pytest

from gpuledger.core.errors import TimeLimitError
from gpuledger.optimizer.deadline import command_deadline


def _query_interrupted_by_the_signal() -> None:
    """What DuckDB does when the deadline's handler raises during a query."""
    try:
        time.sleep(5)
    except TimeLimitError:
        raise RuntimeError("Query interrupted") from None


def test_a_deadline_inside_a_duckdb_query_is_a_time_limit():
    with pytest.raises(TimeLimitError, match=r"time limit of 0\.2 s"), command_deadline(0.2, "optimize quota"):
        _query_interrupted_by_the_signal()


def test_another_runtime_error_passes_through():
    with pytest.raises(RuntimeError, match="not a deadline"), command_deadline(30, "optimize quota"):
        raise RuntimeError("not a deadline")
