"""Steps 2–7 of the sampling model (`analytics.sampling.model`) over sorted integer arrays, in Polars.

The model's steps are numbered in `analytics.sampling.steps`, which holds the SQL of step 1 (the
read: hashes and readings, computed where the samples are) and of the names. Everything after
the read is here, once, for all three consumers (hourly frame, allocations, idle runs).

Why not SQL: the SQL pass (decision 0051, kept in `bench/sampling_sql_before.py` as the
baseline) paid for four partitioned window sorts and a merge `GROUP BY` over every sample, most
of a roll-up's time (decision 0122). Here the rows are put in (card, device, time) order ONCE,
by one 64-bit key (a dense card-major device number above the time since the read's start), and
every window becomes a comparison with the neighbouring row:

- lag / lead within a device: the row above or below when it has the same device number;
- the card's next scrape: the next distinct (card, time) key, by binary search in the sorted
  distinct keys (a card's devices interleave in time, so its rows are not adjacent);
- the staleness carry per (device, holder): a forward fill of (value, time of reading, segment)
  where a segment is a stretch of one holder on one device, null where it is too old or from
  another segment; a holder back on a device after another within the bound (the only case a
  segment's fill cannot see) looks back with an as-of join over those few rows;
- run numbers: a cumulative sum of "does not continue" over the whole array (each device's first
  row never continues, so the numbers are unique across devices).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from gpuledger.analytics.sampling import read
from gpuledger.analytics.sampling.steps import HOUR_US
from gpuledger.core.errors import InputError

_KEY_BITS = 62
"""Bits of the (device, time) sort key: device numbers and read spans must fit (a 70,000-device
fleet over a read of 50 days fits; longer windows are refused with one line)."""

_FIELDS = ("gr", "util", "fb")


@dataclass(frozen=True, slots=True)
class Pieces:
    """Step 7's input: each held row's interval clipped to the window, with its runs.

    `rows`: pair, alloc_no, idle_no, act, fb, run_us, a, b, long_idle, held_idle;
    `pairs`: each (device, holder) pair's number and hashes; `names`: their labels.
    """

    rows: pl.DataFrame
    pairs: pl.DataFrame
    names: pl.DataFrame


def _ordered(
    values: pl.DataFrame, series: pl.DataFrame, names: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Rows sorted by one Int64 key: dense card-major device number, then time since the first
    row. Only the key, the series number and the readings travel through the sort; device,
    card, holder and time come back after it from the key and from per-series lookups (a
    gather from a few thousand rows, not a join of strings)."""
    devs = names.select("dev", "card").unique("dev").sort(["card", "dev"]).with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("dix"),
        (pl.col("card").ne_missing(pl.col("card").shift(1)).cum_sum() - 1).cast(pl.Int64).alias("cix"),
    )
    lo, hi = values["t"].min(), values["t"].max()
    tbits = (int(hi) - int(lo) + 1).bit_length()  # type: ignore[arg-type]
    if devs.height.bit_length() + tbits > _KEY_BITS:
        raise InputError(
            f"sample pass: {devs.height} devices over {(1 << tbits) / 3.6e9:.0f} h do not fit one "
            "sort key; use a shorter window"
        )
    unit = 1 << tbits
    lookup = _series_lookup(series, devs)
    fields = [f for f in _FIELDS if f != "util" or values["gr"].null_count()]
    frame = values.select(
        (lookup["dix"].gather(values["sid"]) * unit + (pl.col("t") - lo)).alias("key"), "sid", *fields,
    ).sort("key", multithreaded=False)  # two cores: the parallel sort cost 1.6x the CPU, same wall
    frame = frame.with_columns((pl.col("key") // unit).alias("dix"))
    frame = frame.with_columns(
        (pl.col("key") - pl.col("dix") * unit + lo).alias("t"), devs["cix"].gather(frame["dix"]).alias("cix"),
        lookup["hold"].gather(frame["sid"]).alias("hold"),
        *([] if "util" in fields else [pl.lit(None, pl.Float64).alias("util")]),
    )
    frame = frame.with_columns((pl.col("cix") * unit + pl.col("key") % unit).alias("ckey")).drop("sid")
    return frame, devs.select("dix", "dev", (pl.len().over("cix") > 1).alias("shared")), unit


def _series_lookup(series: pl.DataFrame, devs: pl.DataFrame) -> pl.DataFrame:
    """Device number and holder hash indexed by series id (row `sid` holds series `sid`'s)."""
    dix = series.join(devs.select("dev", "dix"), on="dev", how="left")
    size = int(series["sid"].max()) + 1 if series.height else 1  # type: ignore[arg-type]
    at = dix["sid"].cast(pl.Int64)
    return pl.DataFrame({
        "dix": pl.repeat(None, size, dtype=pl.Int64, eager=True).scatter(at, dix["dix"]),
        "hold": pl.repeat(None, size, dtype=series.schema["hold"], eager=True).scatter(at, dix["hold"]),
    })


def _in_order(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """`frame` with `column` flagged ascending, which it is by construction: the rows are in key
    order (card-major device, then time), so the card number, the key and every run number (a
    cumulative sum of 0/1) never decrease down the rows, and filters keep the order. Polars then
    groups by slicing runs of equal values instead of hashing every row (5x less CPU)."""
    return frame.with_columns(pl.col(column).set_sorted())


def _merged(frame: pl.DataFrame) -> pl.DataFrame:
    """Step 2: rows of one device at one time become one (holder kept, each reading kept)."""
    if not frame.select((pl.col("key") == pl.col("key").shift(1)).any()).item():
        return frame
    return _in_order(frame, "key").group_by("key").agg(
        pl.col("dix", "cix", "ckey", "t").first(), pl.col("hold").min(), *[pl.col(f).max() for f in _FIELDS],
    ).sort("key")


def _card_next(frame: pl.DataFrame, unit: int, devs: pl.DataFrame) -> pl.Series:
    """Step 3: each row's card's next scrape (next distinct time on the card), else null.

    On a card with one device that is the device's next row; the rows of cards with several
    devices (MIG, vGPU) take the next distinct (card, time) key (`_next_distinct`)."""
    next_row = pl.when(pl.col("dix") == pl.col("dix").shift(-1)).then(pl.col("t").shift(-1))
    alone = frame.select(next_row.alias("t_card_next")).to_series()
    shared = devs["shared"].gather(frame["dix"])
    if not shared.any():
        return alone
    rows = frame.select("ckey", "t").filter(shared)
    rows = rows.with_columns(pl.Series("after", _next_distinct(rows["ckey"].to_numpy(), unit)))
    found = rows.select(pl.when(pl.col("after") >= 0).then(pl.col("after") - pl.col("ckey") + pl.col("t")))
    return alone.scatter(shared.arg_true(), found.to_series())


def _next_distinct(keys: np.ndarray, unit: int) -> np.ndarray:
    """For each (card, time) key, the next greater key of the same card, else -1.

    A stable argsort (numpy's timsort): the rows come card by card, each card's devices one
    after another in time order, so it merges a few sorted runs per card instead of sorting.
    In key order the next distinct key of a run of equal keys is the one after its last."""
    perm = np.argsort(keys, kind="stable")
    ordered = keys[perm]
    n = len(ordered)
    last = np.ones(n, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    run_end = np.minimum.accumulate(np.where(last, np.arange(n), n)[::-1])[::-1]
    after = np.append(ordered[1:], -1)[run_end]
    out = np.empty(n, dtype=np.int64)
    out[perm] = np.where((after >= 0) & (after // unit == ordered // unit), after, -1)
    return out


def _carried(frame: pl.DataFrame, stale: int) -> pl.DataFrame:
    """Step 3: each field's last reading for the same device and holder within `stale`; a field
    no row misses is its own carry."""
    seg_start = pl.col("dix").ne_missing(pl.col("dix").shift(1)) | pl.col("hold").ne_missing(
        pl.col("hold").shift(1)
    )
    frame = frame.with_columns(seg_start.cum_sum().alias("seg"))
    segs = None
    for f in _FIELDS:
        if f == "util" and frame["gr_c"].null_count() == 0:
            # Activity is GR_ENGINE_ACTIVE's wherever it is known: GPU_UTIL's carry is unread.
            frame = frame.with_columns(pl.lit(None, pl.Float64).alias("util_c"))
            continue
        if frame[f].null_count() == 0:
            frame = frame.with_columns(pl.col(f).alias(f"{f}_c"))
            continue
        has = pl.col(f).is_not_null()
        seg_of = pl.when(has).then(pl.col("seg")).forward_fill()
        t_of = pl.when(has).then(pl.col("t")).forward_fill()
        fresh = (seg_of == pl.col("seg")) & (pl.col("t") - t_of <= stale)
        frame = frame.with_columns(pl.when(fresh).then(pl.col(f).forward_fill()).alias(f"{f}_c"))
        segs = _segments(frame) if segs is None else segs
        frame = _returning_holders(frame, segs, f, stale)
    return frame


def _returning_holders(frame: pl.DataFrame, segs: pl.DataFrame, f: str, stale: int) -> pl.DataFrame:
    """The carry a segment's own fill cannot see: a holder back on a device after another, whose
    reading from its earlier stretch is within the bound. As-of join over those rows only."""
    back = segs.filter(~pl.struct("dix", "hold").is_first_distinct())["seg"]
    if back.is_empty():
        return frame
    pairs = segs.filter(pl.col("seg").is_in(back.implode())).select("dix", "hold").unique()
    scope = frame.join(pairs, on=["dix", "hold"], how="semi", nulls_equal=True).with_columns(
        pl.col("hold").is_null().alias("no_hold"), pl.col("hold").fill_null(0).alias("hk"),
    )
    by = ["dix", "hk", "no_hold"]
    want = scope.filter(pl.col(f"{f}_c").is_null() & pl.col("seg").is_in(back.implode()))
    if want.is_empty():
        return frame
    readings = scope.filter(pl.col(f).is_not_null()).select(
        *by, pl.col("t").alias("tr"), pl.col(f).alias("v")
    )
    found = want.select("key", *by, "t").join_asof(
        readings, left_on="t", right_on="tr", by=by, strategy="backward", tolerance=stale,
        check_sortedness=False,
    ).filter(pl.col("v").is_not_null()).select("key", "v")
    return frame.join(found, on="key", how="left", maintain_order="left").with_columns(
        pl.coalesce(f"{f}_c", "v").alias(f"{f}_c")
    ).drop("v")


def _segments(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per segment (a stretch of one holder on one device), in order, with the number
    of its (device, holder) pair (`pair`, dense from 0)."""
    segs = frame.filter(pl.col("seg").ne_missing(pl.col("seg").shift(1))).select("seg", "dix", "hold")
    pairs = segs.select("dix", "hold").unique(maintain_order=True).with_row_index("pair")
    return segs.join(pairs, on=["dix", "hold"], how="left", nulls_equal=True, maintain_order="left")


def _spacing(frame: pl.DataFrame, stale: int, fallback: int) -> pl.DataFrame:
    """Step 4: each card's spacing (lower median of its intervals up to `stale`), else the
    median over cards, else `fallback`."""
    gaps = frame.select("cix", (pl.col("t_card_next") - pl.col("t")).alias("d"))
    per_card = _in_order(gaps.filter(pl.col("d") <= stale), "cix").group_by("cix").agg(
        pl.col("d").quantile(0.5, "lower").cast(pl.Int64).alias("sp")
    )
    fleet = per_card["sp"].quantile(0.5, "lower") if per_card.height else None
    default = int(fleet) if fleet is not None else fallback
    cards = frame.select("cix").unique().join(per_card, on="cix", how="left")
    return cards.with_columns(pl.col("sp").fill_null(default))


def _runs(frame: pl.DataFrame, p: dict[str, Any]) -> pl.DataFrame:
    """Step 5: each row's interval `dt`, whether it continues the row before, and its runs."""
    same_prev = pl.col("dix") == pl.col("dix").shift(1)
    same_next = pl.col("dix") == pl.col("dix").shift(-1)
    frame = frame.with_columns(_constant("_100", 100.0, frame.height))  # see `_constant`
    frame = frame.with_columns(pl.coalesce(pl.col("gr_c"), pl.col("util_c") / pl.col("_100")).alias("act"))
    t_next = pl.min_horizontal(pl.when(same_next).then(pl.col("t").shift(-1)), pl.col("t_card_next"))
    tol = pl.max_horizontal(pl.lit(p["tol"], pl.Int64), pl.col("sp"))
    continues = (
        same_prev & (pl.col("t") - pl.col("t").shift(1) <= tol)
        & pl.col("hold").eq_missing(pl.col("hold").shift(1))
    ).fill_null(False)
    idle = (pl.col("act") < p["thr"]).fill_null(False)
    idle_prev = pl.when(same_prev).then(pl.col("act").shift(1) < p["thr"]).fill_null(False)
    frame = frame.with_columns(
        pl.when(t_next - pl.col("t") <= tol).then(t_next - pl.col("t")).otherwise(pl.col("sp")).alias("dt"),
        continues.alias("cont"), idle.alias("idle"), (idle & idle_prev & continues).alias("idle_cont"),
    )
    return frame.select(
        "t", "hold", "pair", "act", "fb_c", "dt", "idle",
        (~pl.col("cont")).cum_sum().alias("alloc_no"), (~pl.col("idle_cont")).cum_sum().alias("idle_no"),
    )


def _pieces(frame: pl.DataFrame, p: dict[str, Any]) -> pl.DataFrame:
    """Steps 6–7: idle runs over their full length, then every held interval clipped. Run
    numbers are dense, so a run's figures reach its rows by position, not by a join."""
    idle = _in_order(frame.filter(pl.col("idle") & pl.col("hold").is_not_null()), "idle_no")
    lengths = idle.group_by("idle_no").agg(
        pl.col("dt").sum().alias("run_us"), pl.col("fb_c").mean().alias("fb_avg")
    )
    size = int(frame["idle_no"].max()) + 1  # type: ignore[arg-type]
    at = lengths["idle_no"]
    run_us = pl.repeat(None, size, dtype=pl.Int64, eager=True).scatter(at, lengths["run_us"])
    fb_avg = pl.repeat(None, size, dtype=pl.Float64, eager=True).scatter(at, lengths["fb_avg"])
    columns = ("t", "dt", "pair", "alloc_no", "idle_no", "act", "fb_c")
    held = frame.select(*columns, "hold").filter(
        pl.col("hold").is_not_null() & (pl.col("t") + pl.col("dt") > p["ws"]) & (pl.col("t") < p["we"])
    )
    held = held.with_columns(run_us.gather(held["idle_no"]).alias("run_us"),
                             fb_avg.gather(held["idle_no"]).alias("fb_avg"))
    long_idle = pl.col("run_us") >= p["min_idle"]
    return held.select(
        "pair", "alloc_no", "idle_no", "act", pl.col("fb_c").alias("fb"), "run_us",
        pl.max_horizontal(pl.col("t"), pl.lit(p["ws"], pl.Int64)).alias("a"),
        pl.min_horizontal(pl.col("t") + pl.col("dt"), pl.lit(p["we"], pl.Int64)).alias("b"),
        long_idle.fill_null(False).alias("long_idle"),
        (long_idle & (pl.col("fb_avg") >= p["held_fb"])).fill_null(False).alias("held_idle"),
    )


def run(wh: Any, p: dict[str, Any]) -> Pieces:
    """The pass over the read window of `p` (`model.params`): steps 1–7 up to the clip."""
    span = {"lo": p["lo"], "hi": p["hi"]}
    values, series, names = read.read(wh, span)
    if values.is_empty():
        return Pieces(_empty_rows(), names.select("dev", "hold").with_row_index("pair"), names)
    frame, devs, unit = _ordered(values, series, names)
    del values  # the sorted copy replaces it: the pass holds one copy of the rows at a time
    frame = _merged(frame)
    frame = frame.with_columns(_card_next(frame, unit, devs))
    frame = _carried(frame, p["stale"])
    spacing = _spacing(frame, p["stale"], p["fallback"])
    segs = _segments(frame)
    frame = frame.select(
        "dix", "t", "hold", "t_card_next", "gr_c", "util_c", "fb_c",
        pl.col("cix").replace_strict(spacing["cix"], spacing["sp"]).alias("sp"),
        segs["pair"].gather(frame["seg"] - 1).alias("pair"),
    )
    pairs = segs.unique("pair").join(devs, on="dix").select("pair", "dev", "hold")
    return Pieces(_pieces(_runs(frame, p), p), pairs, names)


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={
        "pair": pl.UInt32, "alloc_no": pl.UInt32, "idle_no": pl.UInt32,
        "act": pl.Float64, "fb": pl.Float64, "run_us": pl.Int64, "a": pl.Int64, "b": pl.Int64,
        "long_idle": pl.Boolean, "held_idle": pl.Boolean,
    })


def hourly(pieces: Pieces) -> pl.DataFrame:
    """Step 7 for the hourly frame: split at the hour (an interval is at most the tolerance,
    never over 1 h, so at most two parts), summed per hour, device and holder.

    Summed in two levels: first per allocation run and hour (a key that never decreases down
    the rows, since a run is consecutive rows of one holder on one device, so Polars groups
    slices), then those partial sums and the few parts past the hour per pair and hour (one
    integer key: the pair's number above the hour's). Card-hours are integer microseconds, so
    exactly the same; `active_ratio` is a float sum in another order (within 1e-12)."""
    rows = pieces.rows.filter(pl.col("b") > pl.col("a")).with_columns(
        (pl.col("a") - pl.col("a") % HOUR_US).alias("h0")
    )
    first = rows.select(
        "pair", "act", "fb", "long_idle", "held_idle", pl.col("h0").alias("hour"),
        (pl.min_horizontal("b", pl.col("h0") + HOUR_US) - pl.col("a")).alias("len"),
        (pl.col("alloc_no").cast(pl.Int64) * (1 << 24) + pl.col("h0") // HOUR_US).alias("g"),
    )
    second = rows.filter(pl.col("b") > pl.col("h0") + HOUR_US).select(
        "pair", "act", "fb", "long_idle", "held_idle", (pl.col("h0") + HOUR_US).alias("hour"),
        (pl.col("b") - (pl.col("h0") + HOUR_US)).alias("len"),
    )
    partial = _in_order(first, "g").group_by("g").agg(pl.col("pair", "hour").first(), *_hour_sums())
    parts = pl.concat([partial.drop("g"), second.select("pair", "hour", *_hour_sums(each_row=True))])
    group = pl.col("pair").cast(pl.Int64) * (1 << 24) + pl.col("hour") // HOUR_US
    sums = parts.group_by(group.alias("g")).agg(
        pl.col("pair", "hour").first(),
        *[pl.col(c).sum() for c in ("held_hours", "idle_hours", "held_idle_hours", "known", "weighted")],
        pl.col("fb_used_max_mib").max(),
    )
    sums = sums.select(
        "pair", "hour", "held_hours", "idle_hours", "held_idle_hours",
        pl.when(pl.col("known") > 0).then(pl.col("weighted") / pl.col("known")).alias("active_ratio"),
        "fb_used_max_mib",
    )
    return _named(_in_hours(sums, "held_hours", "idle_hours", "held_idle_hours"), pieces, "hour")


def _hour_sums(each_row: bool = False) -> list[pl.Expr]:
    """Per part of an hour: held, idle and held-idle microseconds, those with an activity
    reading (`known`) and activity x length (`weighted`), the framebuffer maximum; summed over
    a group's rows, or one part's own (`each_row`)."""
    length = pl.col("len")
    exprs = [
        length.alias("held_hours"),
        pl.when(pl.col("long_idle")).then(length).otherwise(0).alias("idle_hours"),
        pl.when(pl.col("held_idle")).then(length).otherwise(0).alias("held_idle_hours"),
        pl.when(pl.col("act").is_not_null()).then(length).otherwise(0).alias("known"),
        (length * pl.col("act")).fill_null(0.0).alias("weighted"),
    ]
    if each_row:
        return [*exprs, pl.col("fb").alias("fb_used_max_mib")]
    return [*[e.sum() for e in exprs], pl.col("fb").max().alias("fb_used_max_mib")]


def allocations(pieces: Pieces) -> pl.DataFrame:
    """Each allocation (a run of one holder on one device) clipped to the window."""
    runs = _in_order(pieces.rows.filter(pl.col("b") > pl.col("a")), "alloc_no").group_by("alloc_no").agg(
        pl.col("pair").first(), pl.col("a").min().alias("start_us"), pl.col("b").max().alias("end_us")
    ).drop("alloc_no")
    return _named(runs, pieces)


def idle_runs(pieces: Pieces) -> pl.DataFrame:
    """Idle runs of at least the minimum, clipped to the window (`run_hours`: full length)."""
    rows = pieces.rows.filter(pl.col("long_idle") & (pl.col("b") > pl.col("a")))
    runs = _in_order(rows, "idle_no").group_by("idle_no").agg(
        pl.col("pair").first(), pl.col("a").min().alias("start_us"), pl.col("b").max().alias("end_us"),
        (pl.col("b") - pl.col("a")).sum().alias("idle_hours"),
        pl.col("held_idle").any().alias("held"), pl.col("fb").max().alias("fb_used_max_mib"),
        pl.col("act").mean().alias("active_mean"), pl.col("run_us").first().alias("run_hours"),
    ).drop("idle_no")
    return _named(_in_hours(runs, "idle_hours", "run_hours"), pieces)


def _constant(name: str, value: float, height: int) -> pl.Series:
    """A divisor as a column of its own: Polars turns a division by a literal into a
    multiplication by its reciprocal (one ulp off SQL's IEEE division in about a quarter of the
    values), and the pass must give SQL's numbers exactly."""
    return pl.repeat(value, height, dtype=pl.Float64, eager=True).alias(name)


def _in_hours(frame: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """Microsecond sums as hours (each an IEEE division, `_constant`)."""
    frame = frame.with_columns(_constant("_hour", float(HOUR_US), frame.height))
    return frame.with_columns([pl.col(c).cast(pl.Float64) / pl.col("_hour") for c in columns]).drop("_hour")


_NAME_COLUMNS = ("uuid", "gpu_i_id", "vgpu", "profile", "node", "namespace", "pod")


def _named(frame: pl.DataFrame, pieces: Pieces, *first: str) -> pl.DataFrame:
    """Labels back on aggregated rows (by pair number, then the device and holder hashes)."""
    rest = [c for c in frame.columns if c not in {"pair", *first}]
    joined = frame.join(pieces.pairs, on="pair").join(pieces.names, on=["dev", "hold"], how="inner")
    return joined.select(*first, *_NAME_COLUMNS, *rest)
