"""The advice kinds read from the warehouse (registered in `analytics.advice.KINDS`).

Each kind is a function `(wh, window, settings) -> Advice`: rows in one shape for the CLI
table, the dashboard and the statements (`kind`, `scope`, `current`, `recommended`,
`monthly_saving`, `reason`) plus a JSON document with the full evidence. The analysis itself
lives in the kind's module (its docstring gives the method); this module only reads the
warehouse through `warehouse.queries.advice` and hands the frames over.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from gpuledger.analytics.advice import KINDS, autoscaling, fragmentation, overcommit, profile_catalog
from gpuledger.analytics.advice.autoscaling_month import Keep, ServingMonth, cut, in_threads
from gpuledger.core.config import Settings
from gpuledger.core.mig import canonical_model, catalog
from gpuledger.core.pricing import PriceBook
from gpuledger.core.rules import SamplingRules
from gpuledger.core.steady import steady
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import advice as queries

if TYPE_CHECKING:
    from gpuledger.analytics.billing.bill import Bill
    from gpuledger.core.activity import ActivitySource
    from gpuledger.warehouse.day_parts import DayParts, DayRead
    from gpuledger.warehouse.protocols import ReadableWarehouse

HOURS_PER_MONTH = 730.0
COLUMNS = ("kind", "scope", "current", "recommended", "monthly_saving", "reason")


@dataclass(frozen=True)
class Advice:
    kind: str
    rows: list[dict[str, object]]
    document: dict[str, Any] = field(default_factory=dict)


AdviceFn = Callable[[Warehouse, Window, Settings], Advice]
"""What a kind registered in `analytics.advice.KINDS` is. A kind that prices from the window's
bill also takes a keyword `bill` (`reads_bill`): `run_advice` hands it the caller's."""


def _price(settings: Settings, model: str, moment: datetime) -> float:
    try:
        return PriceBook(settings).price_at(model, moment)
    except Exception:
        return 0.0


def catalog_advice(wh: Warehouse, window: Window, settings: Settings, bill: Bill | None = None, *,
                   usage: pl.DataFrame | None = None) -> Advice:
    """Item 1: the standard profile catalog per model, from right-sized demand (priced by
    `bill`, the window's, computed here when not given). `usage`: `workload_usage` of that
    bill when the caller has it already (`refresh-serving` computes it once for the
    recommendations and this kind; `reads_usage`)."""
    from gpuledger.analytics.workloads.recommend import sized
    from gpuledger.analytics.workloads.requested import workload_usage

    usage = workload_usage(wh, window, settings, bill) if usage is None else usage
    held, price = pl.col("held_hours").fill_null(0.0), pl.col("unit_price").fill_null(0.0)
    demand = sized(usage, 0.2).filter(pl.col("need_memory_mib").is_not_null()).select(
        pl.col("model").cast(pl.String), pl.format("{}/{}", "namespace", "pod").alias("workload"),
        "need_memory_mib", "need_compute", held.alias("gpu_hours"), price.alias("unit_price"),
        (held * price * pl.col("share") * pl.col("discount_factor")).alias("current_cost"),
    ).cast(profile_catalog.DEMAND_SCHEMA)  # type: ignore[arg-type]
    a = settings.advice
    found = profile_catalog.choose_catalog(
        demand, k=a.catalog_size, max_rounding=a.catalog_max_rounding,
        mig_factor=settings.sharing.discounts.get("mig", 1.0), basis=settings.sharing.mig_share_basis)
    month = HOURS_PER_MONTH / window.hours
    out = []
    for c in (c for c in found if c.workloads):
        goal = "meets" if c.coverage >= a.catalog_goal else "misses"
        out.append({
            "kind": "profile_catalog", "scope": c.model, "current": f"{c.workloads} MIG workloads",
            "recommended": ", ".join(c.profiles), "monthly_saving": (c.cost_now - c.cost_catalog) * month,
            "reason": (f"covers {c.covered}/{c.workloads} workloads ({c.coverage:.0%}, {goal} the "
                       f"{a.catalog_goal:.0%} goal), {c.coverage_gpu_hours:.0%} of GPU-hours; catalog "
                       f"costs {(c.cost_catalog - c.cost_unconstrained) * month:,.2f}/month more than "
                       f"unconstrained profiles; {len(c.uncovered)} uncovered"),
        })
    return Advice("profile-catalog", out, {"models": [c.as_dict() for c in found], "goal": a.catalog_goal})


def by_day(
    read: Callable[[Warehouse, datetime, datetime], pl.DataFrame], wh: Warehouse, window: Window,
    order: tuple[str, ...], columns: tuple[str, ...] | None = None,
) -> pl.DataFrame:
    """A per-minute advice query read one UTC day at a time, in `order` (the query's ORDER BY,
    unique per row, so the month comes back row for row as one query would give it).

    Why: one query over the month holds the month's hash tables and window partitions in
    DuckDB at once (at 1,000 GPUs the advice peaked near 12 GB); a day at a time bounds that
    to a day's, and the day's frame is trimmed to `columns` before the next is read. Every row
    of these queries is one minute, so no row spans two days; the token rate's lag looks 10
    minutes back across the start, as it does at the window's start."""
    parts = []
    for day in window.days():
        part = read(wh, day.start, day.end)
        parts.append(part.select(columns) if columns else part)
    found = [part for part in parts if not part.is_empty()]
    if not found:
        return parts[0] if parts else read(wh, window.start, window.end)
    return pl.concat(found, how="vertical_relaxed").sort(order)


def through(days: DayParts | None, name: str, activity: ActivitySource, read: DayRead) -> DayRead:
    """`read` (a per-minute query of `warehouse.queries.advice` named `name`, read a day at a
    time), through `days` where the caller keeps day parts (`warehouse.day_parts`: a day whose
    inputs are unchanged is not queried again); `read` itself without them."""
    if days is None:
        return read
    return days.through(queries.per_minute_query_version(name, activity), read)


def keep_day(days: DayParts, wh: Warehouse, day: Window, settings: Settings) -> None:
    """Read the UTC day `day`'s per-minute advice inputs and token counters through `days`, so
    they are kept before any advice asks: `gpuledger demo` calls it on a reading connection for
    each day as soon as it is loaded, on the cores the load leaves idle, and its month's advice
    and token costs then read the kept parts (an unchanged day's stamp is all they query)."""
    from gpuledger.warehouse.queries import workloads

    activity = SamplingRules.of(settings).activity
    for name, read in queries.PER_MINUTE_READS.items():  # kept under the names the kinds read by
        if name == "serving_minutes":  # kept as the autoscaling month's pieces
            serving_pieces(days, wh, activity)(day, None, lambda frame, count: cut(frame, count or 1))
            continue
        through(days, name, activity, _under(read, activity))(wh, day.start, day.end)
    days.day(workloads.token_piece_version(), wh, day.start, day.end, workloads.token_piece)


def _under(read: queries.PerMinuteRead, activity: ActivitySource) -> DayRead:
    """`read` under the activity rule `activity`: a day read as `DayParts` takes one."""
    return lambda wh, start, end: read(wh, start, end, activity)


def overcommit_advice(wh: Warehouse, window: Window, settings: Settings, *,
                      days: DayParts | None = None) -> Advice:
    """Item 3: the knee of replicas per card on time-sliced and vGPU pools."""
    found = overcommit_pools(wh, window, settings, days=days)
    rows: list[dict[str, object]] = [{
        "kind": "overcommit_past_knee" if o.past_knee else "overcommit_ratio",
        "scope": f"{o.pool} ({o.workload_class})", "current": f"1:{o.running:.1f}",
        # past the knee the advice is to shed replicas, which it cannot price: unknown, not 0
        "recommended": f"1:{o.recommended}", "monthly_saving": None if o.past_knee else o.monthly_saving,
        "reason": o.reason(),
    } for o in found]
    return Advice("overcommit", rows, {"pools": [o.as_dict() for o in found]})


def overcommit_pools(wh: Warehouse, window: Window, settings: Settings, *,
                     days: DayParts | None = None) -> list[overcommit.OvercommitAdvice]:
    """The overcommit analysis per (pool, class), from the shared cards' minutes summed per
    level in DuckDB a day at a time (sums and counts: the month is a few rows per pool, never a
    per-minute frame); `days`: a refresh's day parts (`through`)."""
    activity = SamplingRules.of(settings).activity
    read = through(days, "shared_card_levels", activity,
                   lambda w, lo, hi: queries.shared_card_levels(w, lo, hi, activity))
    found_levels = steady(by_day(  # DuckDB's sums, the same double every run
        read, wh, window, ("pool", "model", "owner_kind", "class_label", "holders")))
    if found_levels.is_empty():
        return []
    prices = {m: _price(settings, canonical_model(m), window.start) for m in found_levels["model"].unique()}
    owners = found_levels.select("owner_kind", "class_label").unique()
    owners = owners.with_columns(pl.Series("workload_class", [
        overcommit.classify(k, {"gpuledger.io/workload-class": lbl} if lbl else None)
        for k, lbl in owners.iter_rows()], dtype=pl.String))  # once per (owner kind, label)
    levels = found_levels.join(owners, on=["owner_kind", "class_label"], how="left",
                               nulls_equal=True).with_columns(
        (pl.col("model").replace_strict(prices, default=0.0, return_dtype=pl.Float64) * pl.col("minutes"))
        .alias("price_sum"),
        pl.col("pool").fill_null("(none)"),
    ).select(list(overcommit.LEVEL_SCHEMA))
    a = settings.advice
    return overcommit.advice_from_levels(levels, ceilings=a.overcommit_max, knee_gain=a.overcommit_knee_gain,
                                         window_hours=window.hours)


def policy_of(settings: Settings) -> autoscaling.Policy:
    a = settings.advice
    return autoscaling.Policy(
        window_minutes=a.autoscaling_window_minutes, queue_target=a.autoscaling_queue_target,
        scale_up=a.autoscaling_scale_up, scale_down=a.autoscaling_scale_down,
        up_stabilization_s=a.autoscaling_up_stabilization_s,
        down_stabilization_s=a.autoscaling_down_stabilization_s)


def autoscaling_proposals(
    wh: Warehouse, window: Window, settings: Settings, *, days: DayParts | None = None,
) -> list[autoscaling.AutoscalingAdvice]:
    """Item 4's proposals (what `plans export` renders with `autoscaling_manifest.render_manifests`).

    The serving minutes are read a UTC day at a time (DuckDB holds a day's hash tables) and
    handed over per Deployment, only the replay's columns, by `autoscaling_month.ServingMonth`:
    in as many passes as keep the minutes held at once bounded, each day read once (decisions
    0269, 0277, 0287), a Deployment's GPUs per replica (the largest) learnt by its pass. Each
    Deployment is replayed from its own minutes and dropped, two at a time
    (`autoscaling_month.in_threads`): the month is never one frame, sorted and prepared whole
    (issue 34; the same proposals as that path, tests/advice/test_autoscaling_streamed.py). The
    saving is priced after the last pass, at the dearest model the month served (`priced`: the
    figure a replay at that price gives). `days`: a refresh's day parts, where the serving
    minutes are kept as one piece per pass (`serving_pieces`)."""
    activity = SamplingRules.of(settings).activity
    month = ServingMonth(lambda day: _serving(wh, day.start, day.end, activity), window,
                         keep=serving_pieces(days, wh, activity) if days is not None else None)
    policy = policy_of(settings)
    replays = (partial(autoscaling.deployment_advice, key, minutes, policy, per=month.widest.get(key) or 1)
               for key, minutes in month.deployments())
    unpriced = list(in_threads(replays))
    # the month's models are known once every pass has read its days
    price = max([_price(settings, m, window.start) for m in sorted(month.models)] or [0.0])
    out = [autoscaling.priced(advice, price) for advice in unpriced]
    return sorted(out, key=lambda advice: (advice.namespace, advice.deployment))


def serving_pieces(days: DayParts, wh: Warehouse, activity: ActivitySource) -> Keep:
    """The serving minutes of a whole UTC day kept in `days` as one piece per autoscaling pass
    (`DayParts.pieces`, `autoscaling_month.cut`; decision 0287)."""
    name = f"{queries.per_minute_query_version('serving_minutes', activity)}:pieces"
    read = partial(_serving, activity=activity)
    return lambda day, count, cut: days.pieces(name, wh, day.start, day.end, read, cut=cut, count=count)


def _serving(wh: ReadableWarehouse, start: datetime, end: datetime, activity: ActivitySource) -> pl.DataFrame:
    return queries.serving_minutes(wh, start, end, activity)


def autoscaling_advice_kind(wh: Warehouse, window: Window, settings: Settings, *,
                            days: DayParts | None = None) -> Advice:
    """Item 4: a two-signal HPA per serving Deployment, with the replay as evidence."""
    from gpuledger.analytics.advice.autoscaling_manifest import render_hpa

    found = autoscaling_proposals(wh, window, settings, days=days)
    rows = [_autoscaling_row(p) for p in found if p.gpu_hours_saved > 0 or p.batching]
    documents = [p.as_dict() | {"manifest": render_hpa(p)} for p in found]
    return Advice("autoscaling", rows, {"deployments": documents})


def _autoscaling_row(p: autoscaling.AutoscalingAdvice) -> dict[str, object]:
    """A Deployment's autoscaling row: the HPA and its saving when the replay saves GPU-hours;
    else its batch-size hint, whose saving the replay cannot price: unknown (`None`), not 0, so
    it is listed "not priced" rather than counted "already right-sized" (`analytics.advice
    .actionable`; on the 1,000-GPU bench month every Deployment's advice is such a hint)."""
    saves = p.gpu_hours_saved > 0
    return {
        "kind": "autoscaling", "scope": f"{p.namespace}/{p.deployment}",
        "current": f"{p.gpu_hours_recorded:,.0f} GPU-h",
        "recommended": f"HPA {p.min_replicas}-{p.max_replicas}" if saves else "grow the batch size",
        "monthly_saving": p.monthly_saving if saves else None, "reason": p.reason(),
    }


def fragmentation_advice(wh: Warehouse, window: Window, settings: Settings, *,
                         days: DayParts | None = None) -> Advice:
    """Item 2: fragmentation per node and pool, and rebuilds scheduled into maintenance windows
    (`days`: the day parts the nodes' hourly activity is read through, `through`)."""
    layouts = queries.mig_layouts(wh, window.start, window.end)
    if layouts.is_empty():
        return Advice("fragmentation", [], {"nodes": [], "pools": []})
    names = {str(m): canonical_model(str(m)) for m in layouts["model"].drop_nulls().unique()}
    layouts = layouts.with_columns(
        pl.col("model").replace_strict(names, default=None, return_dtype=pl.String))
    smallest = _smallest_demanded(layouts)
    rates = fragmentation.fragmentation_rates(layouts, smallest)
    a = settings.advice
    found = fragmentation.rebuilds(
        rates, threshold=a.fragmentation_threshold, min_free=a.fragmentation_min_free,
        now=min(window.end, datetime.now(UTC)), windows=a.maintenance_windows,
        activity=_activity_if_needed(wh, window, rates, a.fragmentation_threshold,
                                     SamplingRules.of(settings), days=days))
    rows: list[dict[str, object]] = [{
        "kind": "fragmentation_rebuild", "scope": r.node, "current": f"{r.rate:.0%} fragmented",
        "recommended": "rebuild MIG layout in " + (f"{r.window[0]:%a %H:%M} UTC window" if r.window else
                                                    "a maintenance window"),
        # not priced: the GPUs a rebuild frees are the MIG plan's answer (fragmentation step 5, 0230)
        "monthly_saving": None, "reason": r.reason(),
    } for r in found]
    document = {"threshold": a.fragmentation_threshold, "smallest_profile": smallest,
                "nodes": json.loads(rates.write_json()),
                "pools": json.loads(fragmentation.pool_rates(rates).write_json())}
    return Advice("fragmentation", rows, document)


def _activity_if_needed(
    wh: Warehouse, window: Window, rates: pl.DataFrame, threshold: float, rules: SamplingRules, *,
    days: DayParts | None,
) -> pl.DataFrame | None:
    """The past-load evidence, read only when some node is fragmented enough to rebuild (the
    hourly activity of every node is most of this kind's cost), by the activity rule of `rules`,
    a day at a time (an hour never spans two days) through `days` where kept."""
    if rates.is_empty() or float(rates["rate"].max() or 0.0) < threshold - 1e-12:  # type: ignore[arg-type]
        return None
    activity = rules.activity
    read = through(days, "node_activity_hourly", activity,
                   lambda w, lo, hi: queries.node_activity_hourly(w, lo, hi, activity))
    return by_day(read, wh, window, ("node", "ts"))


def _smallest_demanded(layouts: pl.DataFrame) -> dict[str, str]:
    """The smallest profile in use per model (memory, then compute): what workloads ask for."""
    out: dict[str, str] = {}
    used = layouts.filter(pl.col("profile").is_not_null()).select("model", "profile").unique()
    for model, profile in used.iter_rows():
        known = catalog().get(str(model))
        if known is None or profile not in known.profiles:
            continue
        p = known.profiles[profile]
        if str(model) not in out or (p.memory, p.compute) < (
                known.profiles[out[str(model)]].memory, known.profiles[out[str(model)]].compute):
            out[str(model)] = str(profile)
    return out


def dra_fragmentation_kind(wh: Warehouse, window: Window, settings: Settings) -> Advice:
    """DRA dynamic-MIG cards fragmented in the window (`analytics.advice.dra_kinds`)."""
    from gpuledger.analytics.advice import dra_kinds

    rows, document = dra_kinds.fragmentation_advice(
        wh, window, lambda model: _price(settings, model, window.start), HOURS_PER_MONTH / window.hours)
    return Advice("dra-fragmentation", rows, document)


def dra_profiles_kind(wh: Warehouse, window: Window, settings: Settings) -> Advice:
    """The DeviceClasses to offer DRA MIG claims (`analytics.advice.dra_kinds`)."""
    from gpuledger.analytics.advice import dra_kinds

    rows, document = dra_kinds.profiles_advice(wh, window, settings.advice.catalog_goal)
    return Advice("dra-profiles", rows, document)


def reads_bill(kind: AdviceFn) -> bool:
    """Whether an advice kind prices from the window's bill (it takes a keyword `bill`)."""
    return "bill" in inspect.signature(kind).parameters


def reads_usage(kind: AdviceFn) -> bool:
    """Whether an advice kind also takes the bill's per-allocation usage (a keyword `usage`,
    `analytics.workloads.requested.workload_usage` of the `bill` it is handed). Such a kind
    reads the bill only to make the usage: a refresh hands it the usage alone (the month's bill
    is let go as the usage is made, `dashboards.month_inputs.month_usage`)."""
    return "usage" in inspect.signature(kind).parameters


def reads_days(kind: AdviceFn) -> bool:
    """Whether an advice kind reads per-minute inputs a day at a time through a refresh's day
    parts (a keyword `days`, `warehouse.day_parts.DayParts`)."""
    return "days" in inspect.signature(kind).parameters


def run_advice(
    wh: Warehouse, window: Window, settings: Settings, kinds: tuple[str, ...], *, bill: Bill | None = None,
    usage: pl.DataFrame | None = None, days: DayParts | None = None,
) -> list[Advice]:
    """The named kinds (all of them when `kinds` is empty), in registry order; an unknown
    kind is refused in one line naming the known ones. `bill`: the window's bill, handed to the
    kinds that read one (`reads_bill`), so they price what the caller billed, under its rules
    (`--as-computed`), and its notes are the caller's to show. `usage`: that bill's
    per-allocation usage where the caller has it (`reads_usage`: read once for the report's
    recommendations and the catalog). `days`: the warehouse's day parts
    (`warehouse.day_parts.kept_day_parts`), handed to the kinds that read through them."""
    for name in kinds:
        KINDS.get(name)  # an unknown kind is refused before any work
    chosen = [KINDS.get(name) for name in KINDS.names() if not kinds or name in kinds]
    if days is not None and any(reads_days(run) for run in chosen):
        days.expect(wh, window)  # the window's stamps at once, for the kinds that read through them
    found = []
    for run in chosen:
        shared: dict[str, Any] = {}
        if bill is not None and reads_bill(run):
            shared["bill"] = bill
            if usage is not None and reads_usage(run):
                shared["usage"] = usage
        if days is not None and reads_days(run):
            shared["days"] = days
        found.append(run(wh, window, settings, **shared))
    return found
