"""The registry of device sources, keyed by sharing mode, in the order they claim rows.

DRA claims first (a claim row says so whatever the card), then MIG (an instance id says so
whatever the card's mode), then the card-level sharing modes from the inventory, and the whole
card last as the fallback. Adding a sharing mode is one new module and one `SOURCES.add(...)`
line below (or, from a plug-in, `SOURCES.add(source, before="exclusive")`); the bill, roll-up
and capacity code read `SOURCES` and never name a mode.
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
from gpuledger.core.registry import Registry

SOURCES: Registry[DeviceSource] = Registry(
    "sharing mode", error=InputError, missing="no device source", key=lambda source: source.mode)
"""Precedence order; the last one is the fallback and claims every row left."""
SOURCES.add(DraClaim())
SOURCES.add(MigInstance())
SOURCES.add(TimeSlice())
SOURCES.add(VirtualGpu())
SOURCES.add(WholeCard())


def source_for(mode: str) -> DeviceSource:
    """The source of a sharing mode (InputError naming the known ones otherwise)."""
    return SOURCES.get(mode)


def pod_holder_modes() -> tuple[str, ...]:
    """Card modes whose holders come from the pods when the exporter shows one series."""
    return tuple(s.mode for s in SOURCES if s.holders_from_pods)


def sharing_mode_expr() -> pl.Expr:
    """Each held row's `sharing_mode`: the first source that claims it."""
    *claimed, fallback = tuple(SOURCES)
    expr: pl.Expr = pl.lit(fallback.mode)
    for source in reversed(claimed):
        expr = pl.when(source.matches()).then(pl.lit(source.mode)).otherwise(expr)
    return expr.alias("sharing_mode")


def with_shares(frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
    """`frame` (held rows with `sharing_mode`) with `share`: each row priced by its source."""
    for source in SOURCES:
        frame = source.prepare(frame, inputs)
    *claimed, fallback = tuple(SOURCES)
    share: pl.Expr = fallback.share()
    for source in reversed(claimed):
        share = pl.when(pl.col("sharing_mode") == source.mode).then(source.share()).otherwise(share)
    return frame.with_columns(share.alias("share"))
