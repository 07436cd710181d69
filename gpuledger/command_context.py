"""The command context: what every CLI command receives (the settings loaded once, the
warehouse path, the debug flag).

Commands never read the environment or global state deep inside; they get a `Context`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpuledger.core.config import Settings

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse


@dataclass(frozen=True)
class Context:
    settings: Settings
    warehouse_path: Path
    debug: bool = False
    out: TextIO | None = None
    """Where `echo` writes; None means the `sys.stdout` of the moment (so capture works)."""

    def open_warehouse(self, *, read_only: bool = False) -> Warehouse:
        from gpuledger.warehouse import Warehouse

        return Warehouse.open(self.warehouse_path, read_only=read_only)

    def echo(self, text: str = "") -> None:
        print(text, file=self.out or sys.stdout, flush=True)
