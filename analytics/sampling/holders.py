"""Step 1b of the sampling model: the holders of a HAMi card come from HAMi, not from the samples.

dcgm-exporter names no pod on a card HAMi shares (HAMi's device IDs `GPU-<uuid>-<n>` are not card
UUIDs, so the kubelet's pod-resources answer resolves to nothing: HAMi issues 112, 1032), so the
card has one series without pod labels, holding nothing. Who held it is what HAMi published
(`vgpu_allocations`: the pod annotation, or the scheduler's `hami_vgpu_*` series). So, after
step 1's read and before step 2:

1. Every source's spans of one holder (card, namespace, pod; all its containers) are merged,
   spans less than the staleness bound apart being one (a scrape of the scheduler missed is
   not a release; the same bound that carries a reading over a missed scrape).
2. Each row of the card's unlabeled whole-card series inside a merged span becomes a row of that
   holder, on a device of its own (the card, `gpu_i_id` -1, no `vgpu` label: one device per
   holder, so the pass never merges two holders of one time), with the card's readings and the
   span's bounds (`SPAN`).
3. The pass then treats these rows like any held device: held time from them (ending at the
   card's next scrape, which the card's own series still marks), readings carried, idle runs per
   holder, "activity unknown" where the card had no reading. A card nobody held keeps its one
   unlabeled series: its time is unallocated, never another card's holder's.

What can and cannot be known: dcgm cannot split a HAMi card, so a holder's activity is the card's
while it held it (a holder on a card kept busy by another is busy; a card idle 30 minutes is
idle for each holder that held it throughout). HAMi's own per-container SM use
(`hami_container_device_utilization_ratio`) exists only once a process touched CUDA (HAMi issue
281) and is not read. Which card a pod was on is known only from HAMi: without its annotation or
scheduler series a HAMi pod holds nothing here (its requests alone name no card).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries.hami import vgpu_allocations_between

_HOLDER = ["uuid", "namespace", "pod"]
SPAN = ("span_a", "span_b")
"""Columns the HAMi holders' rows carry (NULL on every other row): the merged span each row is
in, epoch microseconds. HAMi's own record bounds the holder: the sample pass lets no row of it
reach back before the span's start or stand past its end (decision 0180), where the scrape
hole rule alone would guess inside a dcgm hole what HAMi already says."""
_T_BITS = 41
"""Bits of a row's time (microseconds from the read's first row) in the gather key: 25 days."""


def merged_spans(allocations: pl.DataFrame, tolerance_us: int) -> pl.DataFrame:
    """Step 1: per holder (`uuid`, `namespace`, `pod`), its spans `a`..`b` (epoch
    microseconds, half-open) with every source and container merged, gaps up to
    `tolerance_us` closed."""
    spans = allocations.select(
        *_HOLDER, pl.col("start_ts").dt.epoch("us").alias("a"), pl.col("end_ts").dt.epoch("us").alias("b"),
    ).sort([*_HOLDER, "a", "b"])
    reach = pl.col("b").cum_max().shift(1).over(_HOLDER)
    opens = (reach.is_null() | (pl.col("a") > reach + tolerance_us)).cum_sum().alias("_island")
    return spans.with_columns(opens).group_by([*_HOLDER, "_island"], maintain_order=True).agg(
        pl.col("a").min(), pl.col("b").max()
    ).drop("_island")


def with_hami_holders(
    wh: ReadableWarehouse, values: pl.DataFrame, series: pl.DataFrame, names: pl.DataFrame, *,
    lo: datetime, hi: datetime, tolerance_us: int,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Step 1's `values`, `series` and `names` with the HAMi holders' rows added (steps 1-2 of
    the module docstring); unchanged where no HAMi allocation overlaps `[lo, hi)`."""
    if values.is_empty():
        return values, series, names
    allocations = vgpu_allocations_between(wh, lo, hi)
    if allocations.is_empty():
        return values, series, names
    spans = merged_spans(allocations, tolerance_us)
    whole = names.filter(
        pl.col("hold").is_null() & (pl.col("gpu_i_id") == -1) & pl.col("vgpu").is_null()
        & pl.col("profile").is_null() & pl.col("uuid").is_in(spans["uuid"].unique().implode())
    ).select("dev", "card", "uuid", "node")
    cards = series.filter(pl.col("hold").is_null()).join(whole, on="dev").select(
        "sid", "card", "uuid", "node")
    if cards.is_empty():
        return values, series, names
    first_sid = int(series["sid"].max()) + 1  # type: ignore[arg-type]
    virtual = _virtual_series(cards.join(spans, on="uuid"), names, first_sid)
    rows = _rows(values, cards["sid"], virtual)
    bounds = [pl.lit(None, pl.Int64).alias(c) for c in SPAN]
    return (
        pl.concat([values.with_columns(bounds), rows.select(*values.columns, *SPAN)], how="vertical_relaxed"),
        pl.concat([series, virtual.select(series.columns).unique("sid")], how="vertical_relaxed"),
        pl.concat([names, virtual.unique(["dev", "hold"]).select(
            "dev", "hold", "card", "uuid", pl.lit(-1, names.schema["gpu_i_id"]).alias("gpu_i_id"),
            pl.lit(None, names.schema["vgpu"]).alias("vgpu"),
            pl.lit(None, names.schema["profile"]).alias("profile"),
            "node", "namespace", "pod").select(names.columns)], how="vertical_relaxed"),
    )


def _virtual_series(spans: pl.DataFrame, names: pl.DataFrame, first_sid: int) -> pl.DataFrame:
    """Per (card series, holder) a new series id, and each holder's device and holder hashes;
    one row per merged span (`card_sid`, `a`, `b`)."""
    dev_type, hold_type = names.schema["dev"], names.schema["hold"]
    spans = spans.rename({"sid": "card_sid"})
    ids = spans.select("card_sid", "namespace", "pod").unique().sort("card_sid", "namespace", "pod")
    ids = ids.with_row_index("sid", offset=first_sid).with_columns(pl.col("sid").cast(pl.Int32))
    numbered = spans.join(ids, on=["card_sid", "namespace", "pod"]).with_columns(
        pl.concat_str([pl.lit("hami"), "uuid", "namespace", "pod"], separator="\x1f").hash().cast(dev_type)
        .alias("dev"),
        pl.concat_str(["namespace", "pod"], separator="\x1f").hash().cast(hold_type).alias("hold"),
    )
    return numbered.sort("sid", "a")


def _rows(values: pl.DataFrame, card_sids: pl.Series, virtual: pl.DataFrame) -> pl.DataFrame:
    """Step 2: each card row inside a span, as a row of the span's virtual series (one sort of the
    cards' rows, then two binary searches per span: no join of rows against spans)."""
    rows = values.filter(pl.col("sid").is_in(card_sids.implode()))
    if rows.is_empty():
        return values.clear()
    t0 = int(rows["t"].min())  # type: ignore[arg-type]
    block = pl.DataFrame({"sid": card_sids.unique()}).with_row_index("_b")
    top = (1 << _T_BITS) - 1

    def key(frame: pl.DataFrame, b: str, t: pl.Expr) -> np.ndarray:
        return frame.select(
            pl.col(b).cast(pl.Int64) * (1 << _T_BITS) + (t - t0).clip(0, top)).to_series().to_numpy()

    rows = rows.join(block, on="sid").sort("_b", "t")
    keys = key(rows, "_b", pl.col("t"))
    spans = virtual.join(block.rename({"sid": "card_sid"}), on="card_sid")
    lo = np.searchsorted(keys, key(spans, "_b", pl.col("a")), side="left")
    hi = np.searchsorted(keys, key(spans, "_b", pl.col("b")), side="left")
    counts = np.maximum(hi - lo, 0)
    take = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    return rows.drop("_b").with_columns(pl.col("sid").cast(pl.Int32)).gather(take).with_columns(
        pl.Series("sid", np.repeat(spans["sid"].to_numpy(), counts)).cast(values.schema["sid"]),
        pl.Series(SPAN[0], np.repeat(spans["a"].to_numpy(), counts), dtype=pl.Int64),
        pl.Series(SPAN[1], np.repeat(spans["b"].to_numpy(), counts), dtype=pl.Int64))
