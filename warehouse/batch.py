"""A load batch and the checks every load makes on it, apart from the SQL that stores it.

Why apart: `prepare` runs these checks (and the conversion to Arrow) wherever the frames are
made, e.g. on the demo's producer thread while the writer stores the batch before (decision
0136); `Warehouse.load` runs it itself for a batch nobody prepared. Same rules, same errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.core.frames import TABLES, TableSpec, polars_schema
from gpuledger.core.window import Window

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class LoadBatch:
    """Frames to load together in one transaction, and the window they own.

    `window` is required when any frame belongs to a time-series table: the batch replaces
    every row of those tables inside the window. `watermarks` move in the same transaction, so
    a crash never records progress that was not stored.
    """

    frames: Mapping[str, pl.DataFrame]
    window: Window | None = None
    watermarks: Mapping[str, datetime | None] = field(default_factory=dict)
    """Sources moved with the batch; None removes a source's mark."""
    arrow: Mapping[str, pa.Table] | None = None
    """Set only by `prepare`: the checked frames as Arrow tables, which `load` writes as they are."""


def prepare(batch: LoadBatch) -> LoadBatch:
    """`batch` checked as `Warehouse.load` checks it (same rules, same errors) and its frames
    converted to Arrow, for a producer thread to run while the writer stores the batch before
    (decision 0136): polars and the conversion release the GIL, so the writer's turn is the
    SQL alone. `load` writes a prepared batch without checking or converting it again."""
    frames = {name: _prepare(table_spec(name), frame, batch.window) for name, frame in batch.frames.items()}
    # Strings as Arrow string views, polars' own layout: no copy here, and DuckDB scans them
    # faster than the `large_string` copy its `register` of a polars frame used to make.
    newest = pl.CompatLevel.newest()
    return replace(batch, frames=frames,
                   arrow={name: frame.to_arrow(compat_level=newest) for name, frame in frames.items()})


@dataclass(frozen=True)
class LoadStats:
    rows: dict[str, int]
    replaced: dict[str, int]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def table_spec(name: str) -> TableSpec:
    try:
        return TABLES[name]
    except KeyError:
        raise InputError(f"unknown warehouse table {name!r} (known: {', '.join(TABLES)})") from None


def _may_have_duplicates(frame: pl.DataFrame, subset: list[str]) -> bool:
    """Whether two rows might share a key: one 64-bit hash per row and a count of distinct
    hashes, several times cheaper than `unique` on the key columns (strings among them).

    A hash collision only sends a batch down the exact `unique` path, so no duplicate is ever
    missed; collectors and the simulator send none, so the hot path skips the dedupe."""
    if frame.height < 2:
        return False
    hashes = frame.select(pl.struct(subset).hash().alias("h"))["h"]
    return bool(hashes.n_unique() < frame.height)


def _prepare(spec: TableSpec, frame: pl.DataFrame, window: Window | None) -> pl.DataFrame:
    """Check columns and types, drop in-batch duplicates (last wins), check the window."""
    missing = [c for c in spec.column_names if c not in frame.columns]
    if missing:
        raise InputError(f"frame for {spec.name}: missing columns {', '.join(missing)}")
    schema = polars_schema(spec)
    try:
        out = frame.select([pl.col(c).cast(schema[c]) for c in spec.column_names])
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"frame for {spec.name}: {exc}".splitlines()[0]) from None
    for col in spec.columns:
        if not col.nullable and out[col.name].null_count():
            raise InputError(f"frame for {spec.name}: column {col.name} has null values")
    subset = [*spec.key, "start_ts"] if spec.kind == "interval" else list(spec.key)
    if subset and _may_have_duplicates(out, subset):
        out = out.unique(subset=subset, keep="last", maintain_order=True)
    if spec.kind == "timeseries" and out.height:
        if window is None:
            raise InputError(f"frame for {spec.name}: a time-series load needs a window")
        lo, hi = out["ts"].min(), out["ts"].max()
        if lo < window.start or hi >= window.end:  # type: ignore[operator]
            raise InputError(
                f"frame for {spec.name}: rows from {lo!s} to {hi!s} fall outside the load window {window}"
            )
    return out
