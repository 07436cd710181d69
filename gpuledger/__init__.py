"""The roof: the `gpuledger` CLI and the wiring that composes the pipeline stages.

`gpuledger.open(path)` is the notebook entry point (`gpuledger.api.Ledger`): imported on first
use only, so `import gpuledger.core` (which runs this file) stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuledger.api import Ledger

__version__ = "0.1.0"


def open(path: str | Path, *, config: str | Path | None = None, settings: Any = None) -> Ledger:
    """Open a warehouse file for reading from Python: `gl.bill("2026-11", by=["team"])` etc.
    (`gpuledger.api`); `config` is a gpuledger YAML file (default: the built-in settings)."""
    from gpuledger.api import open_ledger

    return open_ledger(path, config=config, settings=settings)
