"""FROZEN: `analytics.advice.fragmentation.fragmentation_rates` as of bc7f130 (a Python loop over
every card-hour's group), the reference the keyed version must equal (test_fragmentation_exact.py).
Do not edit."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from gpuledger.analytics.advice.fragmentation import _rate, card_fragments
from gpuledger.core.mig import COMPUTE_SLICES, gpu_model


def fragmentation_rates(layouts: pl.DataFrame, smallest: Mapping[str, str]) -> pl.DataFrame:
    """Step 3. `layouts`: `ts`, `pool`, `node`, `uuid`, `model`, `profile`, `n` (one row per
    card and profile alive at `ts`; a card with no instance has a row with profile NULL).
    Returns per (`ts`, `pool`, `node`): `free_slices`, `unusable_slices`, `slices`, `rate`."""
    rows = []
    for (ts, pool, node, _uuid, model), group in layouts.sort("ts", "node", "uuid").group_by(
            "ts", "pool", "node", "uuid", "model", maintain_order=True):
        counts = {str(p): int(n) for p, n in group.select("profile", "n").iter_rows() if p}
        geometry = gpu_model(str(model))
        want = smallest.get(str(model)) or (
            min(counts, key=lambda p: geometry.profiles[p].memory) if counts else None)
        if want is None:
            continue
        f = card_fragments(str(model), counts, want)
        rows.append({"ts": ts, "pool": pool, "node": node, "free_slices": f.free,
                     "unusable_slices": f.unusable, "slices": COMPUTE_SLICES})
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
              "ts": layouts.schema.get("ts", pl.Datetime("us", "UTC")), "pool": pl.String, "node": pl.String,
              "free_slices": pl.Int64, "unusable_slices": pl.Int64, "slices": pl.Int64}
    cards = pl.DataFrame(rows, schema=schema)
    return cards.group_by("ts", "pool", "node").agg(
        pl.col("free_slices").sum(), pl.col("unusable_slices").sum(), pl.col("slices").sum(),
    ).with_columns(_rate()).sort("ts", "node")
