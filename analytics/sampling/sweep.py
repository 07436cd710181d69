"""THE sampling model and its pass: from raw `gpu_samples` to who held what, when it was active,
when idle.

Real telemetry is messy: scrapes are jittered (a sample every 57 s, not 60), missed (gaps of
two or three minutes), fields arrive in different scrapes, exporters restart (Prometheus
writes staleness markers), and two Prometheus replicas send the same series twice. The
collector reads each series on the minute grid with `last_over_time(x[step - 1ms])` over the
step centred on each minute (docs/decisions/0035, 0060: a scrape is on its nearest minute),
so a row of `gpu_samples` is "what each field showed in that step", and a field a scrape
missed is NULL in that row while the others are present. This module is the one place that
decides what such rows mean (docs/decisions/0051-sampling-model.md; a worked example in
docs/guide/analytics.md), under the typed rules `core.rules.SamplingRules` (their values come
from the `idle.*` settings; every roll-up stores their fingerprint, docs/decisions/0147):

- **A reading.** A field's value when finite and not negative (`core.activity.reading_sql`):
  NaN and negative values are not readings, they count as missing, never as zero.
- **One row per device and time.** A device is `(uuid, gpu_i_id, vgpu, profile)`, its holder
  `(namespace, pod)` (none when `namespace` is NULL). Two rows of one device at one time (HA
  replicas the collector did not merge) become one: the holder is kept, each field keeps its
  reading, so nothing is counted twice.
- **Held.** Each row stands for `[t, t + dt)`: until the card's next scrape (the device's next
  row, or any device's next row on the same card: a time-slice replica's series vanishes when
  its pod leaves while the card is still scraped) when that comes within the gap tolerance
  (`gap_tolerance_us`, never less than the card's spacing), else for the card's own sample
  spacing: the median interval between the card's rows in the read window, intervals longer
  than the staleness bound left out (a gap is not a spacing); the fleet's median when the card
  has none; `fallback_spacing_us` when nobody has (the hole rule, `core.rules.HOLE_RULE`);
  never `prometheus.step` (a collected bill must not move when it changes).
- **Carried readings.** A field missing from a row inherits the last reading of THAT field for
  the same device and holder within `staleness_us` (5 minutes, Prometheus' default lookback
  delta: the longest a query engine itself would show an old sample). So a minute with memory
  but no activity reading keeps the last activity and never breaks an idle run.
- **Active.** Activity is the rule of `core.activity` (`activity`: GR_ENGINE_ACTIVE, else
  GPU_UTIL / 100; or GPU_UTIL / 100 alone) over the carried readings. A row with no activity
  reading within the bound is "activity unknown": neither idle nor busy, it ends an idle run
  (nobody knows it stayed idle), and an hour with only such rows has `active_ratio` NULL.
- **Idle.** A run of rows of one holder with activity under `idle_threshold`, measured over
  its full length (the read margin, `SamplingRules.margin`, makes this exact at the window's
  edges); a run of at least `idle_min_us` is idle time, "held idle" when framebuffer use
  averages at least `held_fb_mib` over it.

The steps (`run`):

1. Read the window plus the margin: readings, device, card and holder as 64-bit hashes, labels
   once each (`warehouse.queries.sampling.read`); 1b: a HAMi card's rows (dcgm names no holder)
   become its HAMi holders' rows (`analytics.sampling.holders`).
2. One row per device and time: rows of one device at one time merge (holder kept, each
   field's reading kept).
3. Per row: the card's next and previous scrape (`analytics.sampling.neighbours`), and each
   field's last reading for the same device and holder within the staleness bound.
4. Per card: its sample spacing, the median interval between its rows no longer than the
   staleness bound (else the read window's median over cards, else the fallback spacing).
5. Each row's interval `dt` (to the card's next scrape within the tolerance, else the card's
   spacing; a holder that ends inside a scrape hole splits it at its midpoint with the next
   holder's first row, `core.rules.hole_split`, decision 0168), its activity, and the runs: an
   allocation continues while the next row has the same holder and no long gap; an idle run
   while the carried activity stays under the threshold.
6. Idle runs measured over their full length; runs of at least the minimum are idle time,
   "held idle" when framebuffer use averages at least the floor.
7. Every interval clipped to the window (`Pieces`); the consumers split it at the hour or group
   it by run (`analytics.sampling.results`: the hourly frame, allocations, idle runs).

Steps 2-7 run in Polars over sorted integer arrays, not SQL: the SQL pass (decision 0051, the
baseline in `bench/sampling_sql_before.py`) paid for four partitioned window sorts and a merge
`GROUP BY` over every sample (decision 0122). Here the rows are sorted ONCE by one 64-bit key
(card-major device number above time), and every window compares neighbouring rows:

- lag / lead within a device: the row above or below when it has the same device number;
- the card's next scrape: the next distinct (card, time) key, by binary search in the sorted
  distinct keys (a card's devices interleave in time, so its rows are not adjacent);
- the staleness carry per (device, holder): a forward fill of (value, time of reading, segment)
  where a segment is a stretch of one holder on one device, null where it is too old or from
  another segment; a holder back on a device after another within the bound (the only case a
  segment's fill cannot see) looks back with an as-of join over those few rows;
- run numbers: a cumulative sum of "does not continue" (a device's first row never continues).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from gpuledger.analytics.sampling.holders import SPAN, with_hami_holders
from gpuledger.analytics.sampling.neighbours import card_next
from gpuledger.core import activity
from gpuledger.core.errors import InputError
from gpuledger.core.rules import HOLE_RULE_V1, SamplingRules, hole_split
from gpuledger.core.window import Window
from gpuledger.warehouse.protocols import ReadableWarehouse
from gpuledger.warehouse.queries import sampling as read

_US = 1_000_000

_KEY_BITS = 62
"""Bits of the (device, time) sort key: device numbers and read spans must fit (a 70,000-device
fleet over a read of 50 days fits; longer windows are refused with one line)."""

_FIELDS = ("gr", "util", "fb")
_READ_AS = {"gr_engine_active": "gr", "gpu_util": "util"}
"""The read's name of each sample column the activity rule reads (`core.activity.fields`)."""


@dataclass(frozen=True, slots=True)
class Pieces:
    """Step 7's input: each held row's interval clipped to the window, with its runs.

    `rows`: pair, alloc_no, idle_no, act, fb, run_us, a, b, long_idle, held_idle;
    `pairs`: each (device, holder) pair's number and hashes; `names`: their labels.
    """

    rows: pl.DataFrame
    pairs: pl.DataFrame
    names: pl.DataFrame


def run(wh: ReadableWarehouse, window: Window, rules: SamplingRules) -> Pieces:
    """The pass over `window` under `rules`: steps 1-7 up to the clip (module docstring)."""
    values, series, names = read.read(wh, window.start - rules.margin, window.end + rules.margin)
    values, series, names = with_hami_holders(  # step 1b: HAMi's holders (`holders`)
        wh, values, series, names, lo=window.start - rules.margin, hi=window.end + rules.margin,
        tolerance_us=rules.staleness_us)
    if values.is_empty():
        return Pieces(_empty_rows(), names.select("dev", "hold").with_row_index("pair"), names)
    act = [_READ_AS[c] for c in activity.fields(rules.activity)]
    unread = {f for f in _READ_AS.values() if f not in act}
    if values[act[0]].null_count() == 0:  # the rule's first choice is never missing
        unread |= set(act[1:])
    frame, devs, unit = _ordered(values, series, names, unread)
    del values  # the sorted copy replaces it: the pass holds one copy of the rows at a time
    frame = _merged(frame)
    frame = frame.with_columns(*card_next(frame, unit, devs))
    frame = _carried(frame, rules.staleness_us, act, unread)
    spacing = _spacing(frame, rules.staleness_us, rules.fallback_spacing_us)
    segs = _segments(frame)
    frame = frame.select(
        "dix", "t", "hold", "t_card_next", "t_card_prev", "gr_c", "util_c", "fb_c",
        *[c for c in SPAN if c in frame.columns],
        pl.col("cix").replace_strict(spacing["cix"], spacing["sp"]).alias("sp"),
        segs["pair"].gather(frame["seg"] - 1).alias("pair"),
    )
    pairs = segs.unique("pair").join(devs, on="dix").select("pair", "dev", "hold")
    clip = (_epoch_us(window.start), _epoch_us(window.end))
    return Pieces(_pieces(_runs(frame, rules), rules, clip), pairs, names)


def _epoch_us(moment: datetime) -> int:
    return int(moment.timestamp() * _US)


def _ordered(
    values: pl.DataFrame, series: pl.DataFrame, names: pl.DataFrame, unread: set[str]
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
    fields = [f for f in _FIELDS if f not in unread]
    frame = values.select(
        (lookup["dix"].gather(values["sid"]) * unit + (pl.col("t") - lo)).alias("key"), "sid", *fields,
        *[c for c in SPAN if c in values.columns],
    ).sort("key", multithreaded=False)  # two cores: the parallel sort cost 1.6x the CPU, same wall
    frame = frame.with_columns((pl.col("key") // unit).alias("dix"))
    frame = frame.with_columns(
        (pl.col("key") - pl.col("dix") * unit + lo).alias("t"), devs["cix"].gather(frame["dix"]).alias("cix"),
        lookup["hold"].gather(frame["sid"]).alias("hold"),
        *[pl.lit(None, pl.Float64).alias(f) for f in _FIELDS if f not in fields],
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


def in_order(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """`frame` with `column` flagged ascending, which it is by construction: the rows are in key
    order (card-major device, then time), so the card number, the key and every run number (a
    cumulative sum of 0/1) never decrease down the rows, and filters keep the order. Polars then
    groups by slicing runs of equal values instead of hashing every row (5x less CPU)."""
    return frame.with_columns(pl.col(column).set_sorted())


def _merged(frame: pl.DataFrame) -> pl.DataFrame:
    """Step 2: rows of one device at one time become one (holder kept, each reading kept)."""
    if not frame.select((pl.col("key") == pl.col("key").shift(1)).any()).item():
        return frame
    return in_order(frame, "key").group_by("key").agg(
        pl.col("dix", "cix", "ckey", "t").first(), pl.col("hold").min(), *[pl.col(f).max() for f in _FIELDS],
        *[pl.col(c).max() for c in SPAN if c in frame.columns],
    ).sort("key")


def _carried(frame: pl.DataFrame, stale: int, act: list[str], unread: set[str]) -> pl.DataFrame:
    """Step 3: each field's last reading for the same device and holder within `stale`; a field
    no row misses is its own carry. A field the activity rule `act` never reads (`unread`), or
    reads only where an earlier choice has no carried reading while that one always has one, is
    not carried (NULL)."""
    seg_start = pl.col("dix").ne_missing(pl.col("dix").shift(1)) | pl.col("hold").ne_missing(
        pl.col("hold").shift(1)
    )
    frame = frame.with_columns(seg_start.cum_sum().alias("seg"))
    segs = None
    for f in _FIELDS:
        earlier = act[: act.index(f)] if f in act else []
        if f in unread or (earlier and all(frame[f"{e}_c"].null_count() == 0 for e in earlier)):
            frame = frame.with_columns(pl.lit(None, pl.Float64).alias(f"{f}_c"))
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
    per_card = in_order(gaps.filter(pl.col("d") <= stale), "cix").group_by("cix").agg(
        pl.col("d").quantile(0.5, "lower").cast(pl.Int64).alias("sp")
    )
    fleet = per_card["sp"].quantile(0.5, "lower") if per_card.height else None
    default = int(fleet) if fleet is not None else fallback
    cards = frame.select("cix").unique().join(per_card, on="cix", how="left")
    return cards.with_columns(pl.col("sp").fill_null(default))


def _runs(frame: pl.DataFrame, rules: SamplingRules) -> pl.DataFrame:
    """Step 5: each row's interval `dt`, its activity (`core.activity`'s rule over the carried
    readings), whether it continues the row before, and its runs."""
    same_prev = pl.col("dix") == pl.col("dix").shift(1)
    same_next = pl.col("dix") == pl.col("dix").shift(-1)
    frame = frame.with_columns(activity.per_cent_column(frame.height))
    frame = frame.with_columns(activity.activity_of_exprs(
        pl.col("gr_c"), pl.col("util_c"), rules.activity, per_cent=pl.col(activity.PER_CENT)
    ).alias("act"))
    t_next = pl.min_horizontal(pl.when(same_next).then(pl.col("t").shift(-1)), pl.col("t_card_next"))
    tol = pl.max_horizontal(pl.lit(rules.gap_tolerance_us, pl.Int64), pl.col("sp"))
    same_hold_prev = same_prev & pl.col("hold").eq_missing(pl.col("hold").shift(1))
    continues = (same_hold_prev & (pl.col("t") - pl.col("t").shift(1) <= tol)).fill_null(False)
    idle = (pl.col("act") < rules.idle_threshold).fill_null(False)
    idle_prev = pl.when(same_prev).then(pl.col("act").shift(1) < rules.idle_threshold).fill_null(False)
    to_next = t_next - pl.col("t")
    dt = pl.when(to_next <= tol).then(to_next).otherwise(pl.col("sp"))
    back = pl.lit(0, pl.Int64)
    if rules.hole_rule != HOLE_RULE_V1:
        dt, back = hole_split(to_next, tol, same_next, same_hold_prev, rules.staleness_us)
    if SPAN[0] in frame.columns and rules.reach_back_unknown:
        # v3: a HAMi holder's row never leaves HAMi's span (decision 0180)
        a, b, t = pl.col(SPAN[0]), pl.col(SPAN[1]), pl.col("t")
        back = pl.when(a.is_null()).then(back).otherwise(pl.min_horizontal(back, (t - a).clip(0)))
        dt = pl.when(b.is_null()).then(dt).otherwise(pl.min_horizontal(dt, (b - t).clip(0)))
    frame = frame.with_columns(
        dt.alias("dt"), back.alias("back"),
        continues.alias("cont"), idle.alias("idle"), (idle & idle_prev & continues).alias("idle_cont"),
    )
    return frame.select(
        "t", "hold", "pair", "act", "fb_c", "dt", "back", "idle",
        (~pl.col("cont")).cum_sum().alias("alloc_no"), (~pl.col("idle_cont")).cum_sum().alias("idle_no"),
    )


def _pieces(frame: pl.DataFrame, rules: SamplingRules, clip: tuple[int, int]) -> pl.DataFrame:
    """Steps 6–7: idle runs over their full length, then every held interval clipped to `clip`
    (the window, epoch microseconds). Run numbers are dense, so a run's figures reach its rows
    by position, not by a join."""
    ws, we = clip
    # v3 (decision 0179): a first row's reach back is held with its activity unknown, so it is
    # no part of an idle run; it becomes a piece of its own below.
    unknown_back = rules.reach_back_unknown
    run_len = pl.col("dt") if unknown_back else pl.col("dt") + pl.col("back")
    idle = in_order(frame.filter(pl.col("idle") & pl.col("hold").is_not_null()), "idle_no")
    lengths = idle.group_by("idle_no").agg(
        run_len.sum().alias("run_us"), pl.col("fb_c").mean().alias("fb_avg")
    )
    size = int(frame["idle_no"].max()) + 1  # type: ignore[arg-type]
    at = lengths["idle_no"]
    run_us = pl.repeat(None, size, dtype=pl.Int64, eager=True).scatter(at, lengths["run_us"])
    fb_avg = pl.repeat(None, size, dtype=pl.Float64, eager=True).scatter(at, lengths["fb_avg"])
    columns = ("t", "dt", "back", "pair", "alloc_no", "idle_no", "act", "fb_c")
    held = frame.select(*columns, "hold").filter(
        pl.col("hold").is_not_null() & (pl.col("t") + pl.col("dt") > ws) & (pl.col("t") - pl.col("back") < we)
    )
    held = held.with_columns(run_us.gather(held["idle_no"]).alias("run_us"),
                             fb_avg.gather(held["idle_no"]).alias("fb_avg"))
    long_idle = pl.col("run_us") >= rules.idle_min_us
    start = pl.col("t") if unknown_back else pl.col("t") - pl.col("back")
    pieces = held.select(
        "pair", "alloc_no", "idle_no", "act", pl.col("fb_c").alias("fb"), "run_us",
        pl.max_horizontal(start, pl.lit(ws, pl.Int64)).alias("a"),
        pl.min_horizontal(pl.col("t") + pl.col("dt"), pl.lit(we, pl.Int64)).alias("b"),
        long_idle.fill_null(False).alias("long_idle"),
        (long_idle & (pl.col("fb_avg") >= rules.held_fb_mib)).fill_null(False).alias("held_idle"),
    )
    if not unknown_back:
        return pieces
    reached = held.with_row_index("_at").filter(pl.col("back") > 0).select(
        "_at", "pair", "alloc_no", "idle_no", pl.lit(None, pl.Float64).alias("act"),
        pl.lit(None, pl.Float64).alias("fb"), pl.lit(None, pl.Int64).alias("run_us"),
        pl.max_horizontal(pl.col("t") - pl.col("back"), pl.lit(ws, pl.Int64)).alias("a"),
        pl.min_horizontal(pl.col("t"), pl.lit(we, pl.Int64)).alias("b"),
        pl.lit(False).alias("long_idle"), pl.lit(False).alias("held_idle"),
    ).filter(pl.col("b") > pl.col("a"))
    if not reached.height:
        return pieces
    # Each reach back goes just before its row, so run numbers stay ascending down the rows.
    return pl.concat([
        reached.cast(pieces.schema).with_columns(pl.lit(0).alias("_main")),
        pieces.with_row_index("_at").with_columns(pl.lit(1).alias("_main")),
    ], how="diagonal").sort("_at", "_main").drop("_at", "_main")


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={
        "pair": pl.UInt32, "alloc_no": pl.UInt32, "idle_no": pl.UInt32,
        "act": pl.Float64, "fb": pl.Float64, "run_us": pl.Int64, "a": pl.Int64, "b": pl.Int64,
        "long_idle": pl.Boolean, "held_idle": pl.Boolean,
    })
