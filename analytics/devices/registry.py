"""The registry of device sources, keyed by sharing mode, in the order they claim rows.

DRA claims first (a claim row says so whatever the card), then MIG (an instance id says so
whatever the card's mode), then the card-level sharing modes
from the inventory, and the whole card last as the fallback. Adding a sharing mode is one new
module and one entry in `SOURCES`.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import DeviceSource, ShareInputs
from gpuledger.analytics.devices.dra import DraClaim
from gpuledger.analytics.devices.mig import MigInstance
from gpuledger.analytics.devices.timeslice import TimeSlice
from gpuledger.analytics.devices.vgpu import VirtualGpu
from gpuledger.analytics.devices.whole import WholeCard
from gpuledger.core.errors import InputError

SOURCES: tuple[DeviceSource, ...] = (DraClaim(), MigInstance(), TimeSlice(), VirtualGpu(), WholeCard())
"""Precedence order; the last one is the fallback and claims every row left."""


def source_for(mode: str) -> DeviceSource:
    """The source of a sharing mode (InputError naming the known ones otherwise)."""
    for source in SOURCES:
        if source.mode == mode:
            return source
    known = ", ".join(s.mode for s in SOURCES)
    raise InputError(f"sharing mode {mode!r}: no device source (known: {known})")


def pod_holder_modes() -> tuple[str, ...]:
    """Card modes whose holders come from the pods when the exporter shows one series."""
    return tuple(s.mode for s in SOURCES if s.holders_from_pods)


def sharing_mode_expr() -> pl.Expr:
    """Each held row's `sharing_mode`: the first source that claims it."""
    *claimed, fallback = SOURCES
    expr: pl.Expr = pl.lit(fallback.mode)
    for source in reversed(claimed):
        expr = pl.when(source.matches()).then(pl.lit(source.mode)).otherwise(expr)
    return expr.alias("sharing_mode")


def with_shares(frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
    """`frame` (held rows with `sharing_mode`) with `share`: each row priced by its source."""
    for source in SOURCES:
        frame = source.prepare(frame, inputs)
    *claimed, fallback = SOURCES
    share: pl.Expr = fallback.share()
    for source in reversed(claimed):
        share = pl.when(pl.col("sharing_mode") == source.mode).then(source.share()).otherwise(share)
    return frame.with_columns(share.alias("share"))
