"""What a caller needs of "a warehouse", as protocols rather than a class to inherit.

Why: the named read queries (`warehouse.queries.*`) and the analytics run on anything that can
answer a parameterized query: the `Warehouse` itself, a read connection to a dashboard
snapshot, or a wrapper that opens the file only for each call. Subclassing `Warehouse` and
skipping its `__init__` to get those shapes lies about what the object holds (a connection it
does not have); a `typing.Protocol` says exactly what is used and lets mypy check it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse.store import LoadBatch, LoadStats

Params = list[Any] | dict[str, Any] | None
"""Positional (`?`) or named (`$name`) query parameters; values are never pasted into SQL."""


@runtime_checkable
class ReadableWarehouse(Protocol):
    """Something the read queries can run on (the read half of `Warehouse`)."""

    def query(self, sql: str, params: Params = None) -> pl.DataFrame: ...

    def scalar(self, sql: str, params: Params = None) -> Any: ...

    def count(self, table: str) -> int: ...

    def watermark(self, source: str) -> datetime | None: ...


@runtime_checkable
class WritableWarehouse(ReadableWarehouse, Protocol):
    """Something loads and audit entries can be written to (the write half of `Warehouse`)."""

    def load(self, batch: LoadBatch) -> LoadStats: ...

    def append_audit(self, entry: Mapping[str, Any]) -> int: ...
