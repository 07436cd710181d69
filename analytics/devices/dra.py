"""DRA claims (`dra`): a device handed out as a ResourceClaim pays its share of the parent card.

A whole GPU is 1; a MIG device (static or created on demand) is its profile's share by the
configured basis (`sharing.mig_share_basis`, the same table as `analytics.devices.mig`); a shared
claim is already split among the pods reserving it when its rows are made
(`analytics.devices.dra_rows`), so the share here is the device's. The rows come from the
claims, not the samples (see `dra_rows`): this source only prices them.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import ShareInputs
from gpuledger.analytics.devices.dra_rows import DRA_MARK
from gpuledger.analytics.devices.shares import mig_share_table
from gpuledger.core.errors import InputError


class DraClaim:
    """`dra`: a claim row (its `dra_share_basis` set) pays its device's share of the card."""

    mode = "dra"
    holders_from_pods = False

    def matches(self) -> pl.Expr:
        # A frame made without the claim columns (no DRA tables read) has no claim rows: the
        # regex selects nothing there, and the horizontal `any` is then False.
        return pl.any_horizontal(pl.col(f"^{DRA_MARK}$").is_not_null(), pl.lit(False))

    def prepare(self, frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
        if DRA_MARK not in frame.columns:
            return frame.with_columns(pl.lit(None, dtype=pl.String).alias(DRA_MARK),
                                      pl.lit(None, dtype=pl.Float64).alias("_dra_mig_share"))
        mig = frame.filter((pl.col("sharing_mode") == self.mode) & (pl.col(DRA_MARK) == "mig"))
        pairs = list(mig.select("model", pl.col("profile").fill_null("")).unique().iter_rows())
        unknown = [m for m, p in pairs if not p]
        if unknown:
            raise InputError(f"dra_devices: a MIG device on a {unknown[0]} card has no profile attribute")
        table = mig_share_table(pairs, inputs.shares.mig_share_basis)
        return frame.join(table.rename({"mig_share": "_dra_mig_share"}), on=["model", "profile"], how="left")

    def share(self) -> pl.Expr:
        return pl.when(pl.col(DRA_MARK) == "mig").then(pl.col("_dra_mig_share")).otherwise(pl.lit(1.0))
