"""Requested vs used, per workload: what each allocation held and how much of it it used.

A row of `workload_usage` is an allocation: one pod on one device (a whole card, a MIG
instance, a time-slice replica or a vGPU share), with the workload it belongs to (`owned_by`:
the Deployment behind its ReplicaSet, its StatefulSet or Job, or a notebook), so idle ranking
and recommendations can be summed per workload instead of per replica and per card.

From raw samples (pushed into DuckDB): mean, p95 and spread of activity (the rule of
`core.activity` under the bill's rules, `usage_activity`), p95 and peak framebuffer use. From the
bill: card-hours, idle card-hours and cost. From the inventory: the card model, the device's
memory, the pod's owner and requests.

On time-sliced and vGPU cards DCGM reports the whole card's activity and memory on every
replica, so those figures describe the card, not the pod (`card_level_metrics`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

import polars as pl

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.analytics.devices.shares import profile_slices
from gpuledger.core.config import Settings
from gpuledger.core.errors import InputError
from gpuledger.core.mig import MEMORY_SLICES, catalog
from gpuledger.core.rules import Rules
from gpuledger.core.steady import steady
from gpuledger.core.window import Window
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import workloads as queries

if TYPE_CHECKING:
    from gpuledger.core.activity import ActivitySource
    from gpuledger.warehouse.day_parts import DayParts, Ranges
    from gpuledger.warehouse.protocols import ReadableWarehouse

KEYS = ("namespace", "pod", "uuid", "gpu_i_id", "vgpu", "profile")


@cache
def device_memory_mib(model: str, profile: str | None, card_memory: float | None) -> float | None:
    """Framebuffer of the device a workload holds: the card, or its MIG instance's share.
    Cached: a pure function of the MIG catalog (itself loaded once), called per allocation and,
    by the profile catalog's search, 1.5 million times per month of 256 GPUs
    (bench/results/scale_profile.json); a few hundred distinct arguments."""
    if profile is None:
        return card_memory
    known = catalog().get(model)
    if known is not None and profile in known.profiles:
        p = known.profiles[profile]
        if p.memory_mib:
            return float(p.memory_mib)
        total = known.memory_mib or card_memory
        return float(total) * p.memory / MEMORY_SLICES if total else None
    _, memory = profile_slices(model, profile)
    return float(card_memory) * memory / MEMORY_SLICES if memory and card_memory else None


def workload_usage(
    wh: Warehouse, window: Window, settings: Settings, bill: Bill | None = None, *,
    days: DayParts | None = None,
) -> pl.DataFrame:
    """One row per allocation: requested (device, share, requests) vs used (activity, memory).
    Activity by the bill's activity rule (`usage_activity`). `days`: a refresh's day parts,
    which keep the allocations' statistics and compute again only those of allocations with
    samples in a day that changed (`DayParts.spanning`)."""
    bill = bill or compute_bill(wh, window, settings, ("team",))
    return allocation_usage(wh, window, idle_allocations_all(bill), usage_activity(bill.rules, settings),
                            days=days)


def usage_activity(rules: Rules | None, settings: Settings) -> ActivitySource:
    """The activity rule a usage reads its allocations' statistics by: its bill's rules'
    (`Bill.rules`), so a workload's features and its idle hours read activity the same way;
    the settings' where the bill's rules are not known (and what a refresh's bill carries,
    `analytics.usage.plan`: its statistics kept first are read under this rule too)."""
    return (rules or Rules.of(settings)).sampling.activity


def allocation_usage(
    wh: Warehouse, window: Window, held: pl.DataFrame, activity: ActivitySource, *,
    days: DayParts | None = None,
) -> pl.DataFrame:
    """`workload_usage` from what it needs of its bill: the bill per allocation, `held`
    (`idle_allocations_all`), and the activity rule, `activity` (`usage_activity`).

    Why apart: a caller that keeps the bill only for the usage lets it go before the usage's
    reads and joins (`dashboards.month_inputs.month_usage`, decision 0283: at 10,000 GPUs the
    bill's 2.2 GiB of frames beside them were the refresh's peak)."""
    stats = steady(allocation_stats(wh, window, activity, days).drop("first_ts", "last_ts"))
    gpus = queries.card_memory(wh)
    pods = queries.pod_owner_rows(wh)
    frame = (
        stats.join(held, on=list(KEYS), how="inner", nulls_equal=True)
        .join(gpus, on="uuid", how="left")
        .join(pods, on=["namespace", "pod"], how="left")
    )
    del stats, held, pods
    devices = frame.select("model", "profile", "card_memory_mib").unique()  # a few hundred
    devices = devices.with_columns(pl.Series("device_memory_mib", [
        device_memory_mib(*device) for device in devices.iter_rows()], dtype=pl.Float64))
    return owned_by(frame).join(devices, on=["model", "profile", "card_memory_mib"], how="left",
                                nulls_equal=True).with_columns(
        pl.col("sharing_mode").is_in(["timeslice", "vgpu"]).alias("card_level_metrics"),
    ).with_columns(
        (pl.col("fb_p95_mib") / pl.col("device_memory_mib")).alias("fb_p95_ratio"),
    ).sort(["namespace", "pod", "uuid", "gpu_i_id"], nulls_last=True)


def allocation_stats(wh: Warehouse, window: Window, activity: ActivitySource,
                     days: DayParts | None) -> pl.DataFrame:
    """The window's `queries.allocation_stats`, through `days` where the caller keeps them."""
    if days is None:
        return queries.allocation_stats(wh, window.start, window.end, activity)

    def read(w: ReadableWarehouse, lo: datetime, hi: datetime, touching: Ranges) -> pl.DataFrame:
        return queries.allocation_stats(w, lo, hi, activity, touching)

    return days.spanning(queries.allocation_stats_version(activity), wh, window, read, KEYS)


def idle_allocations_all(bill: Bill) -> pl.DataFrame:
    """The bill per allocation (card-hours, idle, cost, held hours), idle or not, with its mean
    share and idle fraction: sums of the detail's figures and ratios of those sums, then made
    `steady` (the same double every run; the ratios taken before, so rounding never moves them)."""
    return steady(bill.allocated().group_by(["team", *KEYS, "sharing_mode", "queue"]).agg(
        pl.col("card_hours").sum(),
        pl.col("idle_card_hours").sum(),
        pl.col("held_idle_card_hours").sum(),
        pl.col("cost").sum(),
        pl.col("idle_cost").sum(),
        (pl.col("card_hours").sum() / pl.col("held_hours").sum()).alias("share"),
        # of the sums as summed: a ratio of two rounded small sums (1/7 of a held minute) strays
        # 1e-8 from 0.5, enough to flip the reclaim threshold; this one is 1e-16 from it
        (pl.col("idle_card_hours").sum() / pl.col("card_hours").sum()).fill_nan(0.0).alias("idle_fraction"),
        pl.col("held_hours").sum(),
        pl.col("unit_price").mean(),
        pl.col("discount_factor").mean(),
    ).collect())



# Workloads, not replicas ------------------------------------------------------------------------
OWNER = "owner"
WORKLOAD_COLUMNS = ("workload_kind", "workload")
_POD_TEMPLATE_HASH = r"^(?P<deployment>.+)-[a-z0-9]{5,10}$"
"""A ReplicaSet made by a Deployment is named `<deployment>-<pod-template-hash>`."""
_NOTEBOOK_LABELS = ("notebook-name", "jupyter.org/notebook", "notebooks.kubeflow.org/name")


def _label(key: str, column: str = "labels") -> pl.Expr:
    """The value of label `key` in the JSON text of `column` (null where the text has no such
    key or is not a JSON object)."""
    return pl.col(column).str.json_path_match(f"$[{json.dumps(key)}]")


def owned_by(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (`owner_kind`, `owner_name`, `labels` as JSON text, `pod`) with the workload each
    pod belongs to, `workload_kind` and `workload`, from its controller reference and labels:
    Deployment (through its ReplicaSet, the pod-template hash dropped), StatefulSet, Job,
    notebook (a notebook server, whatever controls it: a label in `_NOTEBOOK_LABELS` names it,
    or `app` or the component is `notebook`), else the pod itself (kind `Pod`).

    Why expressions: the rule's one home, read for every allocation of a month (173,000 at
    1,000 GPUs, 1.76 M at 10,000), where a Python call per row took most of `workload_usage`'s
    own time (issue 34). Every label the rule reads has the word "notebook" in its key or
    value, so only the texts that have it are parsed (one in seven at 1,000 GPUs; parsing
    every text five times took longer than the Python loop)."""
    text = pl.col("labels")
    read = frame.with_columns(
        pl.when(text.str.contains("notebook", literal=True)).then(text).alias("_notebook"))
    names = [_label(key, "_notebook") for key in _NOTEBOOK_LABELS]
    read = read.with_columns(
        pl.coalesce([pl.when(named != "").then(named) for named in names]).alias("_named"),
        ((_label("app", "_notebook") == "notebook")
         | (_label("app.kubernetes.io/component", "_notebook") == "notebook")).fill_null(False).alias("_app"))
    named, app = pl.col("_named"), pl.col("_app")
    kind, name, pod = pl.col("owner_kind"), pl.col("owner_name"), pl.col("pod")
    has_kind, has_name = kind.fill_null("") != "", name.fill_null("") != ""
    replica_set = (kind == "ReplicaSet") & has_name
    return read.with_columns(
        pl.when(named.is_not_null() | app).then(pl.lit("notebook"))
        .when(replica_set).then(pl.lit("Deployment"))
        .when(has_kind & has_name).then(kind).otherwise(pl.lit("Pod")).alias("workload_kind"),
        pl.when(named.is_not_null()).then(named).when(app).then(pl.when(has_name).then(name).otherwise(pod))
        .when(replica_set).then(name.str.replace(_POD_TEMPLATE_HASH, "${deployment}"))
        .when(has_kind & has_name).then(name).otherwise(pod).alias("workload"),
    ).drop("_notebook", "_named", "_app")


UNLABELLED = "unlabelled"
"""The workload kind of the pods `--by label:<key>` finds without the label."""


def pod_workloads(wh: Warehouse, by: str = OWNER) -> pl.DataFrame:
    """namespace, pod → workload_kind, workload (the grouping `--by owner` or `--by
    label:<key>` names). The pods of a namespace without the label are one workload, "(no <key>
    label)" of kind `UNLABELLED` (issue 32: one line per unlabelled pod gave 5,037 lines for one
    team)."""
    check_workload_by(by)
    pods = queries.last_pod_owners(wh)
    if by == OWNER:
        found = owned_by(pods)
    else:
        key = by.removeprefix("label:")
        value = _label(key)
        labelled = value.fill_null("") != ""
        found = pods.with_columns(
            pl.when(labelled).then(pl.lit(by)).otherwise(pl.lit(UNLABELLED)).alias("workload_kind"),
            pl.when(labelled).then(value).otherwise(pl.lit(f"(no {key} label)")).alias("workload"))
    return found.select("namespace", "pod", *(pl.col(c).cast(pl.String) for c in WORKLOAD_COLUMNS))


def check_workload_by(by: str, also: tuple[str, ...] = ()) -> None:
    """`owner`, `label:<key>` or one of `also` (groupings only the calling command has);
    anything else is one clear line that lists every accepted value."""
    if by == OWNER or by in also or (by.startswith("label:") and len(by) > len("label:")):
        return
    accepted = ", ".join(repr(v) for v in (OWNER, *also))
    raise InputError(f"--by {by!r}: expected {accepted} or 'label:<key>' (e.g. label:app)")


def attach_workloads(frame: pl.DataFrame, workloads: pl.DataFrame) -> pl.DataFrame:
    """`frame` (with namespace, pod) plus its workload; pods the inventory lacks are their own."""
    out = frame.join(workloads, on=["namespace", "pod"], how="left")
    return out.with_columns(
        pl.col("workload_kind").fill_null("Pod"),
        pl.coalesce(pl.col("workload"), pl.col("pod"), pl.lit("-")).alias("workload"),
    )


def filter_scope(frame: pl.DataFrame, team: str | None = None, namespace: str | None = None) -> pl.DataFrame:
    """The rows of one team and/or namespace (`--team`, `--namespace`)."""
    if team is not None:
        frame = frame.filter(pl.col("team") == team)
    if namespace is not None:
        frame = frame.filter(pl.col("namespace") == namespace)
    return frame


def regroup_lines(lines: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Bill lines summed to coarser dimensions `by` (team first). Summing whole-cent lines keeps
    whole cents, so the regrouped lines still add up to the same totals to the cent."""
    from gpuledger.analytics.billing.lines import FLAG_HOURS, HOURS, LINE_VALUES

    sums = [c for c in (*LINE_VALUES, *FLAG_HOURS) if c in lines.columns]
    out = lines.group_by(list(by), maintain_order=True).agg([pl.col(c).sum() for c in sums])
    if "unpriced" in lines.columns:
        out = out.with_columns((pl.col("unpriced_card_hours") > 0).alias("unpriced"))
    return out.with_columns([pl.col(c).round(2) for c in sums if c not in HOURS])  # float noise


def lines_by_workload(lines: pl.DataFrame, workloads: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Bill lines (computed with namespace and pod) per workload: `by` plus `workload_kind` and
    `workload`. Special lines (no pod) keep null workload columns."""
    joined = lines.join(workloads, on=["namespace", "pod"], how="left")
    joined = joined.with_columns(
        pl.when(pl.col("pod").is_not_null()).then(pl.col("workload_kind").fill_null("Pod"))
        .alias("workload_kind"),
        pl.when(pl.col("pod").is_not_null()).then(pl.coalesce("workload", "pod")).alias("workload"),
    )
    return regroup_lines(joined, [*by, "workload_kind", "workload"])
