"""MIG instances (`mig`): a share of the card by its profile's slices.

The share math (basis `compute`, `memory`, `max_normalized`) is `analytics.devices.shares`; this source
applies it to held rows. Under `max_normalized` a raw share is divided by its layout's factor:
from the recorded layout (`mig_instances`) when there is one, else from the instances seen on
the card in that hour, so a layout that sums past one card never bills more than the card.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import ShareInputs
from gpuledger.analytics.devices.shares import layout_factors, mig_share_table, raw_mig_share
from gpuledger.core.errors import InputError
from gpuledger.warehouse.queries.devices import mig_instances_between


class MigInstance:
    """`mig`: a row on a GPU instance (`gpu_i_id` >= 0) pays its profile's share."""

    mode = "mig"
    holders_from_pods = False

    def matches(self) -> pl.Expr:
        return pl.col("gpu_i_id") >= 0

    def prepare(self, frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
        basis = inputs.shares.mig_share_basis
        mig_rows = frame.filter(pl.col("sharing_mode") == self.mode)
        pairs = list(mig_rows.select("model", pl.col("profile").fill_null("")).unique().iter_rows())
        unknown = [(m, p) for m, p in pairs if not p]
        if unknown:
            raise InputError(
                f"gpu_samples: a MIG instance on a {unknown[0][0]} card has no GPU_I_PROFILE label"
            )
        frame = frame.join(mig_share_table(pairs, basis), on=["model", "profile"], how="left")
        if basis != "max_normalized" or not mig_rows.height:
            return frame
        frame = frame.join(_recorded_factors(inputs), on=["uuid", "gpu_i_id", "profile"], how="left")
        frame = frame.join(_hour_factors(mig_rows, basis), on=["uuid", "ts"], how="left")
        factor = pl.coalesce("factor", "_hour_factor", pl.lit(1.0))
        return frame.with_columns((pl.col("mig_share") / factor).alias("mig_share"))

    def share(self) -> pl.Expr:
        return pl.col("mig_share")


def _recorded_factors(inputs: ShareInputs) -> pl.DataFrame:
    """Per instance the `max_normalized` divisor from the recorded layout (`mig_instances`)."""
    instances = mig_instances_between(inputs.wh, inputs.window.start, inputs.window.end)
    gpus = inputs.gpus
    models = dict(zip(gpus["uuid"].to_list(), gpus["model"].to_list(), strict=True))
    return layout_factors(instances, models)


def _hour_factors(mig_rows: pl.DataFrame, basis: str) -> pl.DataFrame:
    """No recorded layout: normalize by the instances seen on the card in the hour."""
    return (
        mig_rows.select("uuid", "ts", "gpu_i_id", "profile", "model").unique()
        .with_columns(
            pl.struct("model", "profile").map_elements(
                lambda r: raw_mig_share(r["model"], r["profile"], basis), return_dtype=pl.Float64
            ).alias("_raw")
        )
        .group_by("uuid", "ts").agg(pl.col("_raw").sum().clip(lower_bound=1.0).alias("_hour_factor"))
    )
