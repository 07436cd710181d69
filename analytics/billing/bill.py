"""The chargeback bill: every card-hour of the fleet priced and put on a line.

Every card-hour lands on a team (its idle time included and shown), on `unattributed` (usage in
a namespace without a team, the namespaces listed), or on `unallocated` (capacity nobody held,
stranded MIG slices included); the discounts that reward sharing are funded on the
`sharing_discount` line. So the lines' card-hours sum to the fleet's, and their costs to the
fleet cost, to the cent, for any window.

1. Usage per day, device and holder (`analytics.usage.daily`: roll-up and/or raw samples), each
   hour from the roll-up only where it was rolled up under the rules in force, else from raw
   samples, else refused (`analytics.usage.plan`, docs/decisions/0147): the bill's `rules` are
   the ones its numbers were computed under, and every label (the MIG share basis) says them.
2. Price it: card-hours x the model's unit price that day = list cost (`price_book`, else the
   default catalog, else zero on lines marked `unpriced`: one unknown model never blocks a
   bill, unless `strict_prices`); the sharing mode's discount factor takes off the
   `sharing_discount`; in a pool billed by utilization, the holder pays only for its active share
   and the rest (`utilization_adjustment`) moves to the pool's `unallocated` line. Idle
   card-hours are priced the same way (`idle_cost`, part of the team's cost).
3. Capacity: each inventoried card's present hours per day; what nobody held is unallocated, at
   list price (stranded MIG counted apart), per pool and model (pool `unknown`: no pool label, `_POOL`).
4. Lines by the requested dimensions, the discount line, redistribution, whole cents
   (`analytics.billing.lines`), then the conservation check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import polars as pl

from gpuledger.analytics.billing import preemption, priority_class
from gpuledger.analytics.billing.lines import (
    group_lines,
    line_json,
    order_lines,
    redistribute,
    round_lines,
    unallocated_summary,
)
from gpuledger.analytics.billing.money import to_cents
from gpuledger.analytics.billing.prices import (
    discount_factor_expr,
    price_changes,
    price_sources,
    price_table,
    utilization_basis_expr,
)
from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.analytics.billing.unallocated import (
    null_columns,
    unallocated_rows,
    unpriced_hours,
    utilization_remainder,
)
from gpuledger.analytics.devices.dra_history import unplaced_claims
from gpuledger.analytics.devices.dra_rows import with_claim_key, with_claim_names
from gpuledger.analytics.devices.replicas import cards, node_configs, replicas_unknown_nodes
from gpuledger.analytics.teams.namespaces import day_start, team_history, teams_between, with_teams
from gpuledger.analytics.usage.daily import KEYS, Source, card_day_held, coarse_usage_from_rollup, usage_of
from gpuledger.analytics.usage.plan import UsagePlan, plan_usage
from gpuledger.core.config import Settings
from gpuledger.core.errors import GpuledgerError, InputError
from gpuledger.core.labels import UNKNOWN
from gpuledger.core.period import Period
from gpuledger.core.pricing import PriceBook
from gpuledger.core.rules import Rules
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.freshness import newest_sample

Grain = Literal["device", "lines"]

_POOL = pl.col("pool").fill_null(UNKNOWN)
"""A card whose node has no pool label is in pool `unknown` (`core.labels`, decision 0166): the
`by pool` lines and the unallocated table name it, and a pool's billing basis can be set for it."""

DIMENSIONS: tuple[str, ...] = (
    "team", "namespace", "pod", "queue", "node", "pool", "model", "sharing_mode", "profile", "uuid",
    "day", "claim", "device_class", "priority_class",
)
"""What `by` may name; `team` is always the first dimension of a bill."""

DETAIL_COLUMNS: tuple[str, ...] = (
    "day", "kind", "team", "namespace", "pod", "queue", "node", "pool", "model", "sharing_mode", "uuid",
    "gpu_i_id", "vgpu", "profile", "claim", "device_class", "share", "held_hours", "card_hours",
    "idle_card_hours", "held_idle_card_hours", "stranded_card_hours", "active_ratio", "fb_used_max_mib",
    "unit_price", "discount_factor", "list_cost", "sharing_discount", "utilization_adjustment", "cost",
    "idle_cost", "activity_unknown_card_hours", "unpriced_card_hours",
)


class ConservationError(GpuledgerError):
    """The bill's lines do not add up to the fleet's card-hours or cost (a bug, never data)."""


ALLOCATED = "allocated"  # the detail's `kind` of a holder's rows (the others: a card's unallocated hours)


@dataclass(frozen=True)
class Bill:
    """A priced window. `lines` sum to `fleet_cost` to the cent; `detail` is the finest grain."""

    window: Window
    currency: str
    by: tuple[str, ...]
    fleet_cost: float
    fleet_card_hours: float
    lines: pl.DataFrame
    detail: pl.DataFrame
    """One row per day x device x holder (and per card-day for `unallocated`), in no set order."""
    unallocated: pl.DataFrame
    unattributed_namespaces: tuple[str, ...]
    redistribution: str
    price_book_version: str
    mig_share_basis: str
    source: str
    extras: dict[str, Any] = field(default_factory=dict)
    unpriced_models: tuple[str, ...] = ()
    """Models with no price in `price_book` nor the default catalog: billed at zero."""
    catalog_priced_models: tuple[str, ...] = ()
    """Models priced from the default catalog (`core/data/gpu_price_catalog.yaml`)."""
    replicas_unknown_nodes: tuple[str, ...] = ()
    """Nodes with time-sliced cards no label gives a replica count (shares by the inventory's count)."""
    newest_sample: datetime | None = None
    """The newest GPU sample (or roll-up hour end) before the window's end: data as of."""
    # GPU-hours lost to preemption, thereof (analytics.billing.preemption)
    preemption: pl.DataFrame | None = None
    rules: Rules | None = None
    """The rules the bill's numbers were computed under (`core.rules`): what its labels say.
    None: some hours come from a roll-up stored before rules were recorded (`warnings`)."""
    as_computed: bool = False
    """Billed as the roll-up was computed (its stored rules), not under today's."""
    notes: tuple[str, ...] = ()
    """What the reader should know about the numbers' source (raw samples: other rules), one line each."""
    warnings: tuple[str, ...] = ()
    """What the bill could not know (rules not recorded), one line each."""

    def allocated(self) -> pl.LazyFrame:
        """The detail's rows a holder held, lazily: polars computes a reader's own columns only (an eager
        filter copied all 33 columns of a 10,000-GPU month's 2.7 M rows, 0.2 GB, for a reader's four)."""
        return self.detail.lazy().filter(pl.col("kind") == ALLOCATED)

    @property
    def period(self) -> str:
        """`YYYY-MM` for a calendar month, else the ISO interval `start/end`."""
        return period_text(self.window)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON of `gpuledger bill --format json` (docs/guide/analytics.md)."""
        lines = [line_json(row) for row in self.lines.iter_rows(named=True)]
        unallocated = [
            {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}
            for row in self.unallocated.iter_rows(named=True)
        ]
        return {
            "schema": "gpuledger.bill/v1",
            "period": self.period,
            "start": _iso(self.window.start),
            "end": _iso(self.window.end),
            "currency": self.currency,
            "fleet_cost": round(self.fleet_cost, 2),
            "fleet_card_hours": round(self.fleet_card_hours, 6),
            "by": list(self.by),
            "redistribution": self.redistribution,
            "mig_share_basis": self.mig_share_basis,
            "price_book_version": self.price_book_version,
            "source": self.source,
            "unattributed_namespaces": list(self.unattributed_namespaces),
            "lines": lines, "unallocated": unallocated,
            "unpriced_models": list(self.unpriced_models),
            "catalog_priced_models": list(self.catalog_priced_models),
            "replicas_unknown_nodes": list(self.replicas_unknown_nodes),
            "newest_sample": _iso(self.newest_sample) if self.newest_sample else None,
            "preemption": preemption.lines_json(self.preemption) if self.preemption is not None else [],
            "rules": _rules_json(self.rules, self.as_computed),
        }


def period_text(window: Window) -> str:
    """`YYYY-MM` for a calendar month, else the ISO interval `start/end`."""
    month = Period.of(window.start)
    if month.window_at(window.step) == window:
        return str(month)
    return f"{_iso(window.start)}/{_iso(window.end)}"


def _rules_json(rules: Rules | None, as_computed: bool) -> dict[str, Any] | None:
    """The bill's rules as its JSON states them: both fingerprints, one line for people and each
    rule's value in the units of its setting (null: rules not known, `Bill.warnings`)."""
    if rules is None:
        return None
    s, pricing = rules.sampling, rules.pricing
    return {
        "fingerprint": rules.fingerprint, "rollup_fingerprint": rules.rollup_fingerprint,
        "as_computed": as_computed, "description": rules.describe(),
        "idle_threshold": s.idle_threshold, "idle_min_minutes": s.idle_min_us / 60e6,
        "held_fb_mib": s.held_fb_mib, "gap_tolerance_s": s.gap_tolerance_us / 1e6,
        "activity": s.activity, "activity_version": s.activity_version,
        "staleness_s": s.staleness_us / 1e6, "fallback_spacing_s": s.fallback_spacing_us / 1e6,
        "hole_rule": s.hole_rule, "mig_share_basis": rules.shares.mig_share_basis,
        "share_rule_version": rules.shares.version, "discounts": dict(pricing.discounts),
        "billing_basis": pricing.billing_basis, "pool_billing_basis": dict(pricing.pool_billing_basis),
        "redistribution": pricing.redistribution,
    }


def _iso(moment: Any) -> str:
    return str(moment.isoformat()).replace("+00:00", "Z")


def _check_by(by: Sequence[str]) -> tuple[str, ...]:
    dims = [d.strip() for d in by if d.strip()]
    bad = [d for d in dims if d not in DIMENSIONS]
    if bad:
        raise InputError(
            f"bill --by {','.join(by)}: unknown dimension {bad[0]!r} (known: {', '.join(DIMENSIONS)})"
        )
    ordered = ["team", *[d for d in dims if d != "team"]]
    return tuple(dict.fromkeys(ordered))


def compute_bill(
    wh: Warehouse, window: Window, settings: Settings, by: Sequence[str] = ("team",), *,
    source: Source = "auto", grain: Grain = "device", strict_prices: bool = False, as_computed: bool = False,
) -> Bill:
    """Price `window` (numbered steps in the module docstring); `strict_prices` raises where a
    model has no price anywhere instead of billing it at zero (step 2); `as_computed` bills the
    roll-up under the rules it was stored under instead of today's (`analytics.usage.plan`).

    `grain="device"` (default) keeps `detail` at day x device x holder. `grain="lines"` prices
    the roll-up summed only by what the lines and prices need (namespace, model, pool, sharing
    mode and the `by` dimensions) and by price period (a day only with `by` day: between two
    price changes every model has one price, docs/decisions/0133): the same lines, a coarser
    `detail` (device columns NULL, `day` the period's first day), much faster for a large
    fleet. It applies when the roll-up covers the window.
    """
    dims = _check_by(by)
    book = PriceBook(settings)
    # 1. Usage, under the rules its plan says.
    plan = plan_usage(wh, window, Rules.of(settings), source=source, as_computed=as_computed,
                      what=f"bill {period_text(window)}")
    configs = node_configs(wh, window)  # the node labels in force: read once for every use below
    inventory = cards(wh, window, configs=configs)  # read and parsed once: raw usage and pricing share it
    teams = team_history(wh, settings, window)  # each namespace's teams in force in the window
    usage, held = _usage(wh, window, settings, dims, plan, grain=grain, gpus=inventory, teams=teams,
                         configs=configs)
    usage, gpus = usage.with_columns(_POOL), inventory.with_columns(_POOL)
    # 2. Price the allocations.
    models = set(usage["model"].unique().to_list()) | set(gpus["model"].unique().to_list())
    prices = price_table(book, models, window, strict=strict_prices)
    allocated = _price_allocated(usage, teams, prices, settings)
    # 3. Capacity: unallocated and stranded.
    unallocated = unallocated_rows(wh, usage, gpus, prices, window=window, rules=plan.compute, held=held,
                                   configs=configs)
    remainder = utilization_remainder(allocated)
    detail = pl.concat(
        [f.select(DETAIL_COLUMNS) for f in (allocated, unallocated, remainder)], how="vertical"
    )
    # 4. Lines.
    fleet_raw = float(detail["list_cost"].sum())
    fleet_cost = to_cents(fleet_raw) / 100
    lines = group_lines(priority_class.with_priority_class(wh, detail, dims), dims)
    lines = redistribute(lines, settings.idle.unallocated_redistribution)
    lines = round_lines(order_lines(lines, dims), fleet_raw, dims)
    unattributed_rows = allocated.filter(pl.col("team") == SpecialLine.UNATTRIBUTED.value)
    unattributed = tuple(sorted(unattributed_rows["namespace"].unique().to_list()))
    bill = Bill(
        window=window, currency=book.currency, by=dims, fleet_cost=fleet_cost,
        fleet_card_hours=float(detail["card_hours"].sum()), lines=lines, detail=detail,
        unallocated=unallocated_summary(unallocated), unattributed_namespaces=unattributed,
        redistribution=settings.idle.unallocated_redistribution,
        price_book_version=book.version, **_rules_fields(plan, _unplaced(wh, window)),
        **_facts(wh, window, gpus, book, models, settings=settings, configs=configs),
    )
    check_conservation(bill)
    return bill


def _usage(
    wh: Warehouse, window: Window, settings: Settings, dims: tuple[str, ...], plan: UsagePlan, *,
    grain: Grain, gpus: pl.DataFrame | None = None, teams: pl.DataFrame, configs: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Step 1: usage with claim names and the card-day held frame when the grain computed it.
    The lines grain reads the roll-up per price period (docs/decisions/0133) when the plan reads
    the whole window from it."""
    held: pl.DataFrame | None = None
    whole = plan.span is not None and (plan.span.start, plan.span.end) == (window.start, window.end)
    if grain == "lines" and whole and plan.source == "rollup":
        keys = priority_class.rollup_keys(with_claim_key(dims), KEYS)
        cuts = None if "day" in dims else teams_between(price_changes(settings, window), teams, window)
        usage, held = coarse_usage_from_rollup(wh, window, [k for k in keys if k != "day"], cuts)
    else:
        usage = usage_of(wh, plan.parts, plan.compute, gpus=gpus, configs=configs)
        if plan.source == "rollup":  # the card-days from the same roll-up rows, summed in SQL
            held = card_day_held(wh, window)
    return _claim_names(wh, usage), held


def _rules_fields(plan: UsagePlan, warnings: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the bill says of its numbers' rules and source: the plan's, its basis label the
    basis its numbers were computed under (`unknown` where the roll-up did not record it)."""
    basis = plan.rules.shares.mig_share_basis if plan.rules is not None else "unknown"
    return {"mig_share_basis": basis, "source": plan.source, "rules": plan.rules,
            "as_computed": plan.as_computed, "notes": plan.notes, "warnings": (*plan.warnings, *warnings)}


def _unplaced(wh: Warehouse, window: Window) -> tuple[str, ...]:
    """One warning naming the DRA claims Prometheus history shows held on devices no series
    placed on a card (`dra_history.unplaced_claims`): capacity held, billed to nobody."""
    claims = unplaced_claims(wh, window)
    if not claims:
        return ()
    shown = ", ".join(claims[:5]) + (f" and {len(claims) - 5} more" if len(claims) > 5 else "")
    return (f"DRA claims held on devices no telemetry places on a card, not billed: {shown}; "
            "collect the ResourceSlices (collect --kubeconfig) to bill them",)


def _claim_names(wh: Warehouse, usage: pl.DataFrame) -> pl.DataFrame:
    """`with_claim_names` on the DRA rows only: the others never match a claim, and joining
    every row of a large fleet's usage costs seconds (docs/decisions/0132)."""
    claims = pl.col("sharing_mode") == "dra"
    rest = usage.filter(~claims).with_columns(null_columns(pl.String, "claim", "device_class"))
    return pl.concat([with_claim_names(wh, usage.filter(claims)), rest], how="vertical")


def _facts(wh: Warehouse, window: Window, gpus: pl.DataFrame, book: PriceBook, models: set[str], *,
           settings: Settings, configs: pl.DataFrame) -> dict[str, Any]:
    """What the bill states besides its numbers: price sources, unknowns, preemption losses."""
    sources = price_sources(book, models)
    return {
        "unpriced_models": sources["unpriced"], "catalog_priced_models": sources["catalog"],
        "replicas_unknown_nodes": replicas_unknown_nodes(wh, gpus, window, configs=configs),
        "newest_sample": newest_sample(wh, before=window.end),
        "preemption": preemption.preemption_lines(preemption.preemption_losses(wh, window, settings)),
    }


def _flag_hours(usage: pl.DataFrame) -> list[pl.Expr]:
    """`unpriced_card_hours`, and `activity_unknown_card_hours` where the usage rows do not
    carry it: a row whose `active_ratio` is NULL had no activity reading at all."""
    unknown = pl.when(pl.col("active_ratio").is_null()).then(pl.col("card_hours")).otherwise(0.0)
    exprs = [unpriced_hours()]
    if "activity_unknown_card_hours" not in usage.columns:
        exprs.append(unknown.alias("activity_unknown_card_hours"))
    return exprs


def _price_allocated(
    usage: pl.DataFrame, teams: pl.DataFrame, prices: pl.DataFrame, settings: Settings
) -> pl.DataFrame:
    frame = (
        with_teams(usage, teams, settings, day_start())
        .join(prices, on=["model", "day"], how="left")
        .with_columns(
            pl.col("team").fill_null(SpecialLine.UNATTRIBUTED.value),
            pl.lit(ALLOCATED).alias("kind"),
            discount_factor_expr(settings).alias("discount_factor"),
            utilization_basis_expr(settings).alias("_by_utilization"),
            (pl.col("card_hours") / pl.col("held_hours")).alias("share"),
            pl.lit(0.0).alias("stranded_card_hours"),
        )
        .with_columns(_flag_hours(usage))
    )
    net = pl.col("card_hours") * pl.col("unit_price") * pl.col("discount_factor")
    charged = pl.when(pl.col("_by_utilization")).then(
        pl.col("weighted_card_hours") * pl.col("unit_price") * pl.col("discount_factor")
    ).otherwise(net)
    frame = frame.with_columns(
        (pl.col("card_hours") * pl.col("unit_price")).alias("list_cost"),
        (pl.col("card_hours") * pl.col("unit_price") - net).alias("sharing_discount"),
        (charged - net).alias("utilization_adjustment"),
        charged.alias("cost"),
        pl.when(pl.col("_by_utilization")).then(pl.lit(0.0))
        .otherwise(pl.col("idle_card_hours") * pl.col("unit_price") * pl.col("discount_factor"))
        .alias("idle_cost"),
    )
    return frame


def check_conservation(bill: Bill) -> None:
    """Raise `ConservationError` unless lines add up to the fleet (cost to the cent)."""
    cents = sum(to_cents(float(v)) for v in bill.lines["cost"].to_list())
    if cents != to_cents(bill.fleet_cost):
        raise ConservationError(
            f"bill {bill.period}: lines sum to {cents / 100:.2f} but the fleet cost is {bill.fleet_cost:.2f}"
        )
    hours = float(bill.lines["card_hours"].sum())
    if not math.isclose(hours, bill.fleet_card_hours, rel_tol=1e-9, abs_tol=1e-6):
        raise ConservationError(
            f"bill {bill.period}: lines hold {hours:.6f} card-hours but the fleet has "
            f"{bill.fleet_card_hours:.6f}"
        )
    missing = bill.detail.filter(pl.col("unit_price").is_null() & (pl.col("card_hours") > 0))
    if missing.height:
        row = missing.row(0, named=True)
        raise ConservationError(f"bill {bill.period}: {row['model']} on {row['day']} has no unit price")
