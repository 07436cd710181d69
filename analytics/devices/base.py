"""The device-source interface: how one sharing mode turns held hours into card-hours.

Each source says which held rows are its own (`matches`, on the sample's `gpu_i_id` and the
card's inventory `card_mode`), adds the columns its share needs (`prepare`: joins, table
look-ups), and gives the share of the card a holder pays for (`share`, 0..1). Sources are
Polars-expression based so a whole month is priced in one pass, whatever the modes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import polars as pl

from gpuledger.analytics.devices.replicas import with_configured_replicas

if TYPE_CHECKING:
    from gpuledger.core.rules import ShareRules
    from gpuledger.core.window import Window
    from gpuledger.warehouse import Warehouse


@dataclass(frozen=True, slots=True)
class ShareInputs:
    """What a source may read to compute shares: the warehouse, the inventory, the window, and
    the share rules in force (`core.rules.ShareRules`: the MIG share basis comes from the rules
    the frame is computed under, never from today's settings, docs/decisions/0147)."""

    wh: Warehouse
    gpus: pl.DataFrame
    window: Window
    shares: ShareRules


class DeviceSource(Protocol):
    """One way of handing out a card (keyed by `mode`, the bill's `sharing_mode` value)."""

    @property
    def mode(self) -> str:
        """The `sharing_mode` value of the rows this source prices."""
        ...

    @property
    def holders_from_pods(self) -> bool:
        """True where a card exported without per-holder series gets its holders from the pods'
        GPU requests (`analytics.devices.unlabeled`): DCGM then shows one series for all sharers."""
        ...

    def matches(self) -> pl.Expr:
        """Boolean: the row is a device of this mode (sources are tried in registry order)."""
        ...

    def prepare(self, frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
        """`frame` (all held rows, `sharing_mode` set) with the columns `share()` reads."""
        ...

    def share(self) -> pl.Expr:
        """The share of the card a row's holder pays for, before clamping a card to one."""
        ...


def with_card_replicas(frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
    """Add `_replicas`: the card's replica count as its node is configured in the row's hour
    (`analytics.devices.replicas`), else the inventory's count, else the replicas seen.

    Shared by the modes that split a card into replicas (time-slice, vGPU); added once.
    """
    if "_replicas" in frame.columns:
        return frame
    seen = frame.group_by("uuid").agg(pl.col("vgpu").n_unique().alias("_seen_replicas"))
    frame = frame.join(seen, on="uuid", how="left")
    node = "gpu_node" if "gpu_node" in frame.columns else "node"
    if "configured_replicas" in frame.columns:  # set per hour already (`replicas.at_hour`)
        pass
    elif node in frame.columns:
        frame = with_configured_replicas(frame, inputs.wh, inputs.window, node)
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("configured_replicas"))
    replicas = pl.coalesce(
        pl.col("configured_replicas").cast(pl.Float64), pl.col("replicas").cast(pl.Float64),
        pl.col("_seen_replicas").cast(pl.Float64),
    )
    return frame.with_columns(replicas.alias("_replicas")).drop("configured_replicas")


class ReplicaSplitCard:
    """What the modes that split a card into replicas (time-slice, vGPU) share: holders come from
    the pods, and each row gets the card's replica count before its share is taken."""

    mode: str
    holders_from_pods = True

    def matches(self) -> pl.Expr:
        return pl.col("card_mode") == self.mode

    def prepare(self, frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
        return with_card_replicas(frame, inputs)
