"""MIG fragmentation per node and pool over time, and off-peak rebuilds in maintenance windows.

A MIG card fragments as instances come and go: slices stay free but no longer line up with a
placement of the profiles workloads ask for. Rebuilding the layout recovers them, but destroys
every instance on the card, so it belongs in an off-peak maintenance window.

1. Layout of each card at each observation time: its MIG instances alive then
   (`mig_instances`). The warehouse does not record start slices, so every valid placement of
   the same profile counts (`core.mig` geometry) is tried and the least fragmented one counts:
   the rate is a lower bound, fragmentation that no placement of those instances avoids.
2. Free slices of a card = the 7 compute slices minus those its instances hold (compute, not
   memory: an empty A100 holds seven 1g instances although it has 8 memory slices, and an
   empty card must not look fragmented). The smallest demanded profile of the model
   (right-sized demand, else the smallest profile in use) is placed greedily, left to right,
   at its allowed starts into the free memory slices while compute slices and its per-card
   maximum allow; free compute slices no placement takes are unusable.
3. Fragmentation rate = unusable free slices / free slices, per node (over its cards) and
   per pool, at each time; 0 when nothing is free. A profile that cannot tile a card (three
   2g on seven compute slices) leaves 1/7 even on an empty card: below any sane threshold.
4. Rebuild: a node whose latest rate is at or above the threshold and with at least
   `min_free` of its compute slices free gets a rebuild recommendation, scheduled into the next
   maintenance window of its pool (`next_window`). The window's past load (mean activity of
   the node in the same weekly range, against its mean over the whole period) goes with it, so
   a reviewer sees that the window really is off-peak.
5. A rebuild is not priced here (`monthly_saving` None): money comes back only when the cards
   are repacked so that some are freed, and how many a layout change frees is the MIG
   planner's answer over the whole pool's demand (`gpuledger optimize mig`: GPUs freed x card
   price). Pricing the unusable slices instead told people "$3,170/month" for a node the plan
   rebuilds for $0.00 because demand needs every card (issue 32, docs/decisions/0230).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import polars as pl

from gpuledger.core.config_advice import MaintenanceWindow, parse_weekly_range
from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, Layout, gpu_model, shape_of

WEEK_MIN = 7 * 1440


@dataclass(frozen=True, slots=True)
class CardFragments:
    free: int
    unusable: int


def card_fragments(model: str, counts: Mapping[str, int], smallest: str) -> CardFragments:
    """Steps 1-2 for one card: the least unusable count over the placements of its instances."""
    return _card_fragments(model, tuple(sorted((p, n) for p, n in counts.items() if n)), smallest)


@cache
def _card_fragments(model: str, items: tuple[tuple[str, int], ...], smallest: str) -> CardFragments:
    """`card_fragments` on a hashable layout: a card's layout rarely changes from hour to hour,
    and the placement search is the whole cost of the kind (a month of hours x cards)."""
    counts = dict(items)
    geometry = gpu_model(model)
    want = shape_of({p: n for p, n in counts.items() if n})
    layouts = [lay for lay in geometry.layouts(media_extensions=True) if shape_of(lay) == want] or [()]
    return min((_fragments(model, lay, counts, smallest) for lay in layouts),
               key=lambda f: (f.unusable, -f.free))


def _fragments(model: str, layout: Layout, counts: Mapping[str, int], smallest: str) -> CardFragments:
    """Step 2 on one placement: greedy left-to-right placements of the smallest profile."""
    geometry = gpu_model(model)
    used: set[int] = set()
    compute = 0
    for placed in layout:
        p = geometry.profiles[placed.profile]
        used |= set(range(placed.start, placed.start + p.memory))
        compute += p.compute
    free_memory = set(range(MEMORY_SLICES)) - used
    free = COMPUTE_SLICES - compute
    want = geometry.profiles[smallest]
    placed_n, usable = counts.get(smallest, 0), 0
    for start in sorted(want.starts):
        span = set(range(start, start + want.memory))
        if (max(span) < MEMORY_SLICES and span <= free_memory
                and compute + want.compute <= COMPUTE_SLICES and placed_n < want.max_count):
            free_memory -= span
            compute += want.compute
            usable += want.compute
            placed_n += 1
    return CardFragments(free=free, unusable=free - usable)


def fragmentation_rates(layouts: pl.DataFrame, smallest: Mapping[str, str]) -> pl.DataFrame:
    """Step 3. `layouts`: `ts`, `pool`, `node`, `uuid`, `model`, `profile`, `n` (one row per
    card and profile alive at `ts`; a card with no instance has a row with profile NULL).
    Returns per (`ts`, `pool`, `node`): `free_slices`, `unusable_slices`, `slices`, `rate`.

    A month holds hours x cards layouts but few distinct ones (a layout changes when an
    instance comes or goes): each card-hour gets its layout as one key string in Polars, the
    placement search runs once per distinct (model, layout), and a join hands the figures back."""
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "ts": layouts.schema.get("ts", pl.Datetime("us", "UTC")), "pool": pl.String, "node": pl.String,
        "free_slices": pl.Int64, "unusable_slices": pl.Int64, "slices": pl.Int64}
    held = pl.col("profile").is_not_null()
    cards = layouts.group_by("ts", "pool", "node", "uuid", "model").agg(
        pl.concat_str(pl.col("profile"), pl.lit("\x1f"), pl.col("n").cast(pl.String)).filter(held)
        .sort().str.join("\x1e").alias("_layout"),
    ).with_columns(pl.col("_layout").fill_null(""))
    found = []
    for model, key in cards.select("model", "_layout").unique().iter_rows():
        counts = {p: int(n) for p, n in (item.split("\x1f") for item in key.split("\x1e") if item)}
        geometry = gpu_model(str(model))
        want = smallest.get(str(model)) or (
            min(sorted(counts), key=lambda p: geometry.profiles[p].memory) if counts else None)
        if want is not None:
            f = card_fragments(str(model), counts, want)
            found.append({"model": model, "_layout": key, "free_slices": f.free,
                          "unusable_slices": f.unusable})
    figures = pl.DataFrame(found, schema={
        "model": layouts.schema.get("model", pl.String), "_layout": pl.String,
        "free_slices": pl.Int64, "unusable_slices": pl.Int64})
    per_card = cards.join(figures, on=["model", "_layout"], how="inner").with_columns(
        pl.lit(COMPUTE_SLICES, pl.Int64).alias("slices"))
    return per_card.group_by("ts", "pool", "node").agg(
        pl.col("free_slices").sum(), pl.col("unusable_slices").sum(), pl.col("slices").sum(),
    ).with_columns(_rate()).select(*schema, "rate").cast(pl.Schema(schema)).sort("ts", "node")


def pool_rates(node_rates: pl.DataFrame) -> pl.DataFrame:
    """Step 3 per pool: the node sums, then the rate."""
    return node_rates.group_by("ts", "pool").agg(
        pl.col("free_slices").sum(), pl.col("unusable_slices").sum(), pl.col("slices").sum(),
    ).with_columns(_rate()).sort("ts", "pool")


def _rate() -> pl.Expr:
    return (pl.when(pl.col("free_slices") > 0)
            .then(pl.col("unusable_slices") / pl.col("free_slices")).otherwise(0.0).alias("rate"))


def windows_for(pool: str | None, windows: Sequence[MaintenanceWindow]) -> list[MaintenanceWindow]:
    """The maintenance windows that apply to a pool (glob match; first matching entries)."""
    return [w for w in windows if fnmatch.fnmatch(pool or "", w.pool)]


def _week_minute(local: datetime) -> int:
    return local.weekday() * 1440 + local.hour * 60 + local.minute


def _occurrences(window: MaintenanceWindow, around: datetime) -> Iterable[tuple[datetime, datetime]]:
    """The window's ranges in UTC in the weeks around `around` (previous, this, next)."""
    zone = ZoneInfo(window.timezone)
    local = around.astimezone(zone)
    monday = (local - timedelta(days=local.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    for week in (-1, 0, 1):
        base = monday + timedelta(weeks=week)
        for text in window.weekly:
            a, b = parse_weekly_range(text)
            start = (base.replace(tzinfo=None) + timedelta(minutes=a)).replace(tzinfo=zone)
            end = (base.replace(tzinfo=None) + timedelta(minutes=b)).replace(tzinfo=zone)
            yield start.astimezone(around.tzinfo), end.astimezone(around.tzinfo)


def next_window(now: datetime, windows: Sequence[MaintenanceWindow]) -> tuple[datetime, datetime] | None:
    """The window range containing `now`, else the next one to start (UTC), or None."""
    spans = sorted(span for w in windows for span in _occurrences(w, now) if span[1] > now)
    return spans[0] if spans else None


def inside_window(now: datetime, windows: Sequence[MaintenanceWindow]) -> bool:
    """Whether `now` falls in one of `windows`: the guard a scheduled apply checks."""
    span = next_window(now, windows)
    return span is not None and span[0] <= now < span[1]


def in_weekly_ranges(ts: datetime, windows: Sequence[MaintenanceWindow]) -> bool:
    """Whether a past instant falls in the windows' weekly ranges (for the past-load check)."""
    for w in windows:
        minute = _week_minute(ts.astimezone(ZoneInfo(w.timezone)))
        for text in w.weekly:
            a, b = parse_weekly_range(text)
            if a <= minute < b or a <= minute + WEEK_MIN < b:
                return True
    return False


PRICED_BY = "what it saves is the GPUs a MIG plan frees: `gpuledger optimize mig`"
"""Where a rebuild's saving is priced (step 5): the reason and the unpriced footer name it."""


@dataclass(frozen=True)
class Rebuild:
    node: str
    pool: str | None
    rate: float
    free_share: float
    window: tuple[datetime, datetime] | None
    window_load: float | None
    overall_load: float | None
    unusable_slices: int
    free_slices: int

    def reason(self) -> str:
        when = (f"next window {self.window[0]:%a %Y-%m-%d %H:%M}-{self.window[1]:%H:%M} UTC"
                if self.window else "no maintenance window configured for its pool")
        load = (f"; past load in the window {self.window_load:.0%} vs {self.overall_load:.0%} overall"
                if self.window_load is not None and self.overall_load is not None else "")
        return (f"fragmentation {self.rate:.0%} of free slices unusable ({self.unusable_slices} of "
                f"{self.free_slices}), {self.free_share:.0%} of slices free; {when}{load}; {PRICED_BY}")


def rebuilds(
    node_rates: pl.DataFrame, *, threshold: float, min_free: float, now: datetime,
    windows: Sequence[MaintenanceWindow], activity: pl.DataFrame | None = None,
) -> list[Rebuild]:
    """Step 4. `activity` (optional): `ts`, `node`, `activity` (hourly means; NULL for an hour
    without a reading, left out of both means) for the past load. Not priced (step 5)."""
    if node_rates.is_empty():
        return []
    latest = node_rates.filter(pl.col("ts") == pl.col("ts").max().over("node"))
    out = []
    for r in latest.sort("node").iter_rows(named=True):
        free_share = r["free_slices"] / r["slices"] if r["slices"] else 0.0
        if r["rate"] < threshold - 1e-12 or free_share < min_free - 1e-12:
            continue
        mine = windows_for(r["pool"], windows)
        window_load, overall = _past_load(activity, str(r["node"]), mine)
        out.append(Rebuild(str(r["node"]), r["pool"], float(r["rate"]), free_share,
                           next_window(now, mine), window_load, overall,
                           int(r["unusable_slices"]), int(r["free_slices"])))
    return out


def _past_load(
    activity: pl.DataFrame | None, node: str, windows: Sequence[MaintenanceWindow],
) -> tuple[float | None, float | None]:
    if activity is None or not windows:
        return None, None
    # An hour without any activity reading is unknown, not idle: it counts in neither mean.
    mine = activity.filter((pl.col("node") == node) & pl.col("activity").is_not_null())
    if mine.is_empty():
        return None, None
    inside = [float(a) for t, a in mine.select("ts", "activity").iter_rows() if in_weekly_ranges(t, windows)]
    overall = float(mine["activity"].mean())  # type: ignore[arg-type]
    return (sum(inside) / len(inside) if inside else None), overall
