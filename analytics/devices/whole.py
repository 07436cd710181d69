"""A whole card per holder (`exclusive`): the holder pays for all of it.

The fallback source: any row no other source claims is a whole card.
"""

from __future__ import annotations

import polars as pl

from gpuledger.analytics.devices.base import ShareInputs


class WholeCard:
    """`exclusive`: share 1."""

    mode = "exclusive"
    holders_from_pods = False

    def matches(self) -> pl.Expr:
        return pl.lit(True)

    def prepare(self, frame: pl.DataFrame, inputs: ShareInputs) -> pl.DataFrame:
        return frame

    def share(self) -> pl.Expr:
        return pl.lit(1.0)
