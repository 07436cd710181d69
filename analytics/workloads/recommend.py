"""Right-sizing recommendations, each with its estimated monthly saving.

1. Usage per workload (`analytics.workloads.requested`) and its profile (`analytics.workloads.profiles`).
2. Right-size: for a workload on a whole card or a MIG instance of a MIG-capable model, the
   smallest MIG profile (core/mig.py facts, media-extension profiles excluded) whose memory
   fits the peak framebuffer use plus `headroom` and whose compute slices fit p95 activity
   (scaled to the slices it holds now) plus `headroom`. A whole-card workload that fits a
   share is its own kind (`whole_to_mig`). Workloads on time-sliced or vGPU cards are not
   right-sized (DCGM reports card-level figures there).
3. Reclaim: a workload idle for at least `reclaim_idle_fraction` of its held time should give
   the card back (`reclaim_idle_notebook` for notebooks, by label or profile) or scale to zero
   while idle (`scale_down_when_idle`, e.g. a service idle every night); saving = its idle cost.
4. One recommendation per workload and kind (`per_workload`): a Deployment's replicas and a
   multi-GPU pod's cards are summed into one row. The kinds live in a registry (`RULES`, a
   `core.registry.Registry`): a new kind is one rule, `RULES.add(rule)`, tried in order.
5. Savings are per month (730 h): what the workload paid per held hour now minus what it
   would pay on the recommended share (price x share x the sharing discount factor), times its
   held hours scaled from the window to a month.

`rightsized_demand` turns the same sizing into demand per GPU model for the MIG optimizer:
how many instances of each profile the workloads need (mean and peak concurrency), and how many
whole cards stay whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import polars as pl

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.devices.shares import WHOLE, billed_share, planned_share
from gpuledger.analytics.workloads.profiles import Profiles, workload_profiles
from gpuledger.analytics.workloads.requested import (
    OWNER,
    attach_workloads,
    device_memory_mib,
    pod_workloads,
    workload_usage,
)
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.mig import COMPUTE_SLICES, catalog
from gpuledger.core.registry import Registry
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Recommendations:
    usage: pl.DataFrame
    """Requested vs used per workload, with its profile."""
    recommendations: pl.DataFrame
    profiles: pl.DataFrame
    """The workload profiles, explained."""
    allocations: pl.DataFrame | None = None
    """The recommendations per allocation (replica and card), before `per_workload`."""


def smallest_profile(
    model: str, need_memory_mib: float, need_compute: int, card_memory: float | None
) -> str | None:
    """The smallest MIG profile of `model` that fits, or None when only the whole card does."""
    for compute, _, name, memory in _sizable(model, card_memory):
        if memory >= need_memory_mib and compute >= need_compute:
            return name
    return None


@cache
def _sizable(model: str, card_memory: float | None) -> tuple[tuple[int, int, str, float], ...]:
    """The MIG profiles of `model` a workload may be sized to (media-extension and whole-card
    profiles excluded), smallest first (compute slices, memory slices, name), each with its
    device's memory: computed once per model and card size, not per allocation (100,000 a
    month at 1,000 GPUs)."""
    known = catalog().get(model)
    if known is None:
        return ()
    return tuple(sorted(
        (p.compute, p.memory, p.name, device_memory_mib(model, p.name, card_memory) or 0.0)
        for p in known.profiles.values() if not p.media_extensions and p.compute < COMPUTE_SLICES
    ))


def _current_compute(model: str, profile: str | None) -> int:
    if profile is None:
        return COMPUTE_SLICES
    known = catalog().get(model)
    if known is not None and profile in known.profiles:
        return known.profiles[profile].compute
    return COMPUTE_SLICES


SIZED = ("target", "need_memory_mib", "need_compute")
"""The columns `sized` adds: the recommended profile (or `WHOLE`), memory and compute needed."""


def sized(usage: pl.DataFrame, headroom: float) -> pl.DataFrame:
    """`usage` with step 2's sizing of every allocation (`SIZED`; null where the rule does not
    apply: time-sliced and vGPU cards, models without MIG): memory = peak framebuffer x (1 +
    headroom); compute slices = p95 activity x the slices held now x (1 + headroom), rounded
    up, at least one; the target is the smallest profile holding both (`smallest_profile`'s
    order), or `WHOLE`. Expressions over the month at once, not a call per allocation
    (173,000 at 1,000 GPUs: 0.5 s of calls and the rows turned into dicts to make them);
    the same IEEE operations in the same order as the rule written per row."""
    models = list(catalog())
    applies = pl.col("sharing_mode").is_in(["exclusive", "mig"]) & pl.col("model").is_in(models)
    pairs = usage.filter(applies).select("model", "profile").unique()
    held = pl.DataFrame(
        [(m, p, _current_compute(m, p)) for m, p in pairs.iter_rows()],
        schema={"model": pl.String, "profile": pl.String, "_held_compute": pl.Int64}, orient="row")
    card = pl.when(pl.col("card_memory_mib") > 0).then(pl.col("card_memory_mib").cast(pl.Float64))
    memory = pl.col("fb_max_mib").cast(pl.Float64).fill_null(0.0) * (1 + headroom)
    compute = pl.max_horizontal(pl.lit(1, pl.Int64), (
        pl.col("act_p95").cast(pl.Float64).fill_null(0.0) * pl.col("_held_compute") * (1 + headroom) - 1e-9
    ).ceil().cast(pl.Int64))
    out = usage.join(held, on=["model", "profile"], how="left", nulls_equal=True,
                     maintain_order="left").with_columns(
        pl.when(applies).then(memory).alias("need_memory_mib"),
        pl.when(applies).then(compute).alias("need_compute"), card.alias("_card"))
    target: Any = pl.lit(WHOLE)
    for model, card_memory in out.filter(applies).select("model", "_card").unique().iter_rows():
        same = (pl.col("model") == model) & (pl.col("_card").is_null() if card_memory is None
                                             else pl.col("_card") == card_memory)
        for slices, _, name, mib in reversed(_sizable(model, card_memory)):  # the smallest tried first
            fits = same & (pl.col("need_memory_mib") <= mib) & (pl.col("need_compute") <= slices)
            target = pl.when(fits).then(pl.lit(name)).otherwise(target)
    return out.with_columns(pl.when(applies).then(target).alias("target")).drop("_held_compute", "_card")


_SCHEMA: dict[str, type[pl.DataType]] = {
    "kind": pl.String, "team": pl.String, "namespace": pl.String, "pod": pl.String,
    "workload_kind": pl.String, "workload": pl.String,
    "model": pl.String, "uuid": pl.String, "current": pl.String, "recommended": pl.String,
    "workload_profile": pl.String, "act_p95": pl.Float64, "fb_max_mib": pl.Float64,
    "idle_fraction": pl.Float64, "monthly_saving": pl.Float64, "reason": pl.String,
}


@dataclass(frozen=True, slots=True)
class _Terms:
    """What every workload's recommendation is judged with."""

    month: float
    """Hours of a month over hours of the window: a saving in the window x this = per month."""
    mig_factor: float
    basis: str
    headroom: float
    reclaim_idle_fraction: float


def recommend(
    wh: Warehouse, window: Window, settings: Settings, *, bill: Bill | None = None,
    headroom: float = 0.2, reclaim_idle_fraction: float = 0.5, seed: int = 7, k: int = 4,
    by: str = OWNER, usage: pl.DataFrame | None = None,
) -> Recommendations:
    """Recommendations for `window` (numbered steps in the module docstring). `usage`:
    `workload_usage` of `bill` when the caller computed it already (`refresh-serving` shares
    it with the profile-catalog advice): then `bill` is not read (nor computed)."""
    usage = workload_usage(wh, window, settings, bill) if usage is None else usage
    profiles: Profiles = workload_profiles(usage, k=k, seed=seed)
    usage = profiles.assignments
    terms = _Terms(
        month=HOURS_PER_MONTH / window.hours, mig_factor=settings.sharing.discounts.get("mig", 1.0),
        basis=settings.sharing.mig_share_basis, headroom=headroom,
        reclaim_idle_fraction=reclaim_idle_fraction,
    )
    rules = tuple(RULES)  # in priority order, once: a month of 1,000 GPUs is 170,000 allocations
    rows = [rec for row in _asked(sized(usage, headroom), terms, rules).iter_rows(named=True)
            if (rec := _recommend_one(row, terms, rules))]
    recs = pl.DataFrame(rows, schema=_SCHEMA).sort(
        ["monthly_saving", "namespace", "pod"], descending=[True, False, False]
    ) if rows else pl.DataFrame(schema=_SCHEMA)
    if by != OWNER:
        recs = attach_workloads(recs.drop("workload_kind", "workload"), pod_workloads(wh, by))
    return Recommendations(usage=usage, recommendations=per_workload(recs), profiles=profiles.clusters,
                           allocations=recs)


@dataclass(frozen=True)
class Rule:
    """One family of recommendations: `judge(row, terms)` returns the recommendation's fields
    (`kind` one of `kinds`, `recommended`, `monthly_saving`, `reason`) for one allocation, or
    None. Rules are tried in `RULES` order and the first that answers wins, so an allocation
    gets at most one recommendation (and a workload at most one per kind, `per_workload`)."""

    name: str
    kinds: tuple[str, ...]
    judge: Callable[[dict[str, Any], _Terms], dict[str, object] | None]
    may_answer: Callable[[_Terms], pl.Expr] | None = None
    """The allocations `judge` may answer, as an expression over the `sized` usage: it is
    asked of those only (its condition's one home), or of every allocation when None. When
    every rule says, the others are never turned into rows: of 173,000 allocations a month at
    1,000 GPUs, about one in ten is asked."""

    @property
    def asked(self) -> str:
        """The column that says whether this rule is asked of an allocation."""
        return f"_asked:{self.name}"


def _asked(usage: pl.DataFrame, terms: _Terms, rules: tuple[Rule, ...]) -> pl.DataFrame:
    """`usage` with each rule's `Rule.asked` column, only the allocations some rule is asked
    of, in their order."""
    if not rules:
        return usage.clear()
    asked = [(rule.may_answer(terms) if rule.may_answer else pl.lit(True)).fill_null(False) for rule in rules]
    return usage.with_columns(a.alias(rule.asked) for a, rule in zip(asked, rules, strict=True)).filter(
        pl.any_horizontal(rule.asked for rule in rules))


RULES: Registry[Rule] = Registry("recommendation rule", error=InputError, key=lambda rule: rule.name)
"""The registry of recommendation kinds, in priority order (`RULES.add(rule, before=...)`)."""


def kinds() -> tuple[str, ...]:
    """Every recommendation kind the registered rules can emit."""
    return tuple(k for rule in RULES for k in rule.kinds)


def _recommend_one(row: dict[str, Any], terms: _Terms, rules: tuple[Rule, ...]) -> dict[str, object] | None:
    """At most one recommendation for one allocation: the first of `rules` that answers."""
    for rule in rules:
        change = rule.judge(row, terms) if row[rule.asked] else None
        if change:
            return {
                "team": row["team"], "namespace": row["namespace"], "pod": row["pod"],
                "workload_kind": row.get("workload_kind") or "Pod",
                "workload": row.get("workload") or row["pod"], "model": row["model"], "uuid": row["uuid"],
                "current": row["profile"] or row["sharing_mode"], "workload_profile": row["workload_profile"],
                "act_p95": row["act_p95"], "fb_max_mib": row["fb_max_mib"],
                "idle_fraction": row["idle_fraction"],
            } | change
    return None


def _reclaim(row: dict[str, Any], terms: _Terms) -> dict[str, object] | None:
    """3. Reclaim idle workloads first (asked of those idle long enough): sizing an idle one
    down still wastes the card."""
    held_hours = float(row["held_hours"] or 0.0)
    cls = row.get("workload_class")
    if cls is not None:
        notebook = cls == "notebook"
    else:
        labels = row.get("labels")
        notebook = "notebook" in str(labels) if labels else str(
            row["workload_profile"]).startswith("idle notebook")
    return {
        "kind": "reclaim_idle_notebook" if notebook else "scale_down_when_idle",
        "recommended": "release the card" if notebook else "scale to zero when idle",
        "monthly_saving": float(row["idle_cost"]) * terms.month,
        "reason": f"idle {row['idle_fraction']:.0%} of {held_hours:.1f} held hours",
    }


def per_workload(recs: pl.DataFrame) -> pl.DataFrame:
    """One row per workload and kind: the savings of its replicas and cards added up, the
    largest one's advice kept (`pod`, `uuid`: that replica), `pods` and `gpus` counted."""
    keys = ["team", "namespace", "workload_kind", "workload", "kind"]
    if recs.is_empty():
        return recs.with_columns(pl.lit(0, pl.UInt32).alias("pods"), pl.lit(0, pl.UInt32).alias("gpus"))
    ordered = recs.sort(["monthly_saving", "pod", "uuid"], descending=[True, False, False], nulls_last=True)
    firsts = [c for c in recs.columns if c not in (*keys, "monthly_saving", "act_p95", "fb_max_mib",
                                                   "idle_fraction")]
    out = ordered.group_by(keys, maintain_order=True).agg(
        *[pl.col(c).first() for c in firsts],
        pl.col("monthly_saving").sum(), pl.col("act_p95").max(), pl.col("fb_max_mib").max(),
        pl.col("idle_fraction").mean(), pl.col("pod").n_unique().alias("pods"), pl.len().alias("gpus"),
    )
    several = pl.format("{} ({} GPU(s) in {} pod(s))", pl.col("reason"), pl.col("gpus"), pl.col("pods"))
    reason = pl.when(pl.col("gpus") > 1).then(several).otherwise(pl.col("reason"))
    out = out.with_columns(reason.alias("reason"))
    return out.select(*recs.columns, "pods", "gpus").sort(
        ["monthly_saving", "namespace", "workload"], descending=[True, False, False])


def _rightsize(row: dict[str, Any], terms: _Terms) -> dict[str, object] | None:
    """A smaller MIG profile that still fits the workload (`sized`; asked where one is another
    profile than its own), when it saves money."""
    target, need_memory, need_compute = (row[c] for c in SIZED)
    new_share = planned_share(str(row["model"]), target, terms.basis)
    if new_share >= float(row["share"]) - 1e-9:
        return None
    held_hours = float(row["held_hours"] or 0.0)
    price = float(row["unit_price"] or 0.0)
    now_per_hour = price * float(row["share"]) * float(row["discount_factor"])
    saving = (now_per_hour - price * new_share * terms.mig_factor) * held_hours * terms.month
    if saving <= 0:
        return None
    return {
        "kind": "whole_to_mig" if row["profile"] is None else "rightsize_mig",
        "recommended": target, "monthly_saving": saving,
        "reason": (
            f"peak memory {float(row['fb_max_mib'] or 0):,.0f} MiB (+{terms.headroom:.0%} = "
            f"{need_memory:,.0f}), p95 activity {float(row['act_p95'] or 0):.2f} needs "
            f"{need_compute} compute slice(s)"
        ),
    }


RULES.add(Rule("reclaim", ("reclaim_idle_notebook", "scale_down_when_idle"), _reclaim,
               lambda terms: (pl.col("idle_fraction") < terms.reclaim_idle_fraction).not_()))
RULES.add(Rule("rightsize", ("whole_to_mig", "rightsize_mig"), _rightsize,
               lambda _: pl.col("target").is_not_null() & (pl.col("target") != WHOLE)
               & pl.col("target").ne_missing(pl.col("profile"))))


def rightsized_demand(
    wh: Warehouse, window: Window, settings: Settings, *, headroom: float = 0.2,
    bill: Bill | None = None,
) -> pl.DataFrame:
    """Right-sized demand per GPU model: `model`, `profile` (or `whole`), `count`, `peak_count`.

    `count` is the mean number of concurrent workloads needing that profile over the window
    (rounded up), `peak_count` the mean on the busiest UTC day (rounded up, at least `count`);
    `card_hours` what they would hold at the recommended size (its share as a planner prices
    it under the settings' basis, `analytics.devices.shares.planned_share`). Only
    workloads on whole cards or MIG instances of MIG-capable models are counted.
    """
    bill = bill or compute_bill(wh, window, settings, ("team",))
    usage = workload_usage(wh, window, settings, bill)
    basis = settings.sharing.mig_share_basis
    schema = {"model": pl.String, "profile": pl.String, "count": pl.Int64, "peak_count": pl.Int64,
              "card_hours": pl.Float64}
    targets = sized(usage, headroom).filter(pl.col("target").is_not_null())
    if targets.is_empty():
        return pl.DataFrame(schema=schema)
    shares = pl.DataFrame(
        [(m, t, billed_share(m, t, basis))
         for m, t in targets.select("model", "target").unique().iter_rows()],
        schema={"model": pl.String, "target": pl.String, "_target_share": pl.Float64}, orient="row")
    targets = targets.join(shares, on=["model", "target"], maintain_order="left").select(
        "namespace", "pod", "uuid", "gpu_i_id", "model", "target", "_target_share", "held_hours")
    per_day = bill.allocated().join(
        targets.lazy().select("namespace", "pod", "uuid", "gpu_i_id", "target", "_target_share"),
        on=["namespace", "pod", "uuid", "gpu_i_id"], how="inner").collect()
    day_hours = per_day.group_by("day").agg(pl.col("held_hours").max().alias("_len"))
    peaks = (
        per_day.group_by("model", "target", "day").agg(pl.col("held_hours").sum().alias("_h"))
        .join(day_hours, on="day")
        .group_by("model", "target").agg(pl.col("_h").max().alias("_peak_day_hours"))
    )
    out = (
        targets.group_by("model", "target").agg(pl.col("held_hours").sum().alias("_held"))
        .join(peaks, on=["model", "target"], how="left")
        .join(per_day.group_by("model", "target").agg(
            (pl.col("held_hours") * pl.col("_target_share")).sum().alias("card_hours")),
            on=["model", "target"], how="left")
        .with_columns(
            (pl.col("_held") / window.hours - 1e-9).ceil().cast(pl.Int64).alias("count"),
            (pl.col("_peak_day_hours") / 24 - 1e-9).ceil().cast(pl.Int64).alias("peak_count"),
        )
        .rename({"target": "profile"})
        .select("model", "profile", "count", "peak_count", "card_hours")
        .sort(["model", "profile"])
    )
    return out.with_columns(pl.max_horizontal("count", "peak_count").alias("peak_count"))
