"""One module per command group; each exposes `register(add_command)`.

The CLI discovers the modules here by name (without importing anything heavy): every module
must keep its module-level imports light and import the stages inside its `run` functions.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Protocol

from gpuledger.context import Context

Handler = Callable[[argparse.Namespace, Context], int]


class AddCommand(Protocol):
    def __call__(self, name: str, help: str, handler: Handler) -> argparse.ArgumentParser: ...
