"""One module per command group; each exposes `register(add_command)`.

The CLI discovers the modules here by name (without importing anything heavy): every module
must keep its module-level imports light and import the stages inside its `run` functions.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gpuledger.command_context import Context

Handler = Callable[[argparse.Namespace, Context], int]


class AddCommand(Protocol):
    def __call__(self, name: str, help: str, handler: Handler) -> argparse.ArgumentParser: ...


def global_options(suppress: bool) -> argparse.ArgumentParser:
    """Global options; with `suppress`, a copy for sub-commands (accepted after the verb too)."""
    parser = argparse.ArgumentParser(add_help=False)

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--config", type=Path, default=default(None),
        help="settings file (default: ./gpuledger.yaml when present)",
    )
    parser.add_argument(
        "--warehouse", type=Path, default=default(None),
        help="DuckDB warehouse file (default: $GPULEDGER_WAREHOUSE or ./gpuledger.duckdb)",
    )
    parser.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks"
    )
    return parser
