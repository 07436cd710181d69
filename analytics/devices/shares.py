"""What fraction of a card each allocation holds.

- whole GPU: 1;
- MIG instance: compute slices / 7 (default), memory slices / 8, or `max_normalized`: the larger
  of the two, scaled down where a layout's instances would sum past one card (4g + 3g is
  4/7 + 4/8 > 1). Slices nobody holds stay unallocated capacity; they are never spread;
- time-sliced replica: 1 / replicas of the card;
- HAMi vGPU: the declared fraction, the larger of `nvidia.com/gpucores` / 100 and
  `nvidia.com/gpumem` / card memory (`gpumem-percentage` / 100 where given), since either one
  keeps other pods off that part of the card. Where HAMi published the allocation (the pod
  annotation or the scheduler's series, `vgpu_allocations`) its amounts are the ones read: the
  cores and MiB HAMi enforces on that card, over HAMi's own total of the card (a percentage
  request is already MiB there; no memory request is the whole card; cores 0 is no core limit,
  so memory alone decides). All four request forms thus price the same way.

Whatever the mode, the shares held on one card in one hour never add up past the card: an
over-committed card is scaled down to one (`clamp_to_card`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

import polars as pl

from gpuledger.core.errors import InputError
from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, catalog, parse_profile_name

MIG_BASES = ("compute", "memory", "max_normalized")


def profile_slices(model: str, profile: str) -> tuple[int, int | None]:
    """(compute slices, memory slices or None) of a MIG profile on a model."""
    known = catalog().get(model)
    if known is not None and profile in known.profiles:
        p = known.profiles[profile]
        return p.compute, p.memory
    compute, _ = parse_profile_name(profile)
    return compute, None


def raw_mig_share(model: str, profile: str, basis: str) -> float:
    """A profile's share before any layout normalization (see module docstring)."""
    compute, memory = profile_slices(model, profile)
    by_compute = compute / COMPUTE_SLICES
    if memory is None:
        return by_compute
    by_memory = memory / MEMORY_SLICES
    if basis == "compute":
        return by_compute
    if basis == "memory":
        return by_memory
    return max(by_compute, by_memory)


def planning_basis(settings_basis: str) -> str:
    """The basis a planner prices a MIG profile by, given the bill's `sharing.mig_share_basis`.

    A recommendation (`analytics.workloads.recommend`) or a profile catalog
    (`analytics.advice.profile_catalog`) prices an instance that does not exist yet. Under
    `compute` and `memory` a share depends on the profile alone, so the bill's own basis is used.
    Under `max_normalized` the billed share is divided by the layout the instance will live in,
    which is not known when planning (and the raw larger-of-two shares of a full layout sum past
    the card): the planner prices by compute slices, the default basis, whose shares of any
    layout fit on one card.
    """
    return "compute" if settings_basis == "max_normalized" else settings_basis


def planned_share(model: str, profile: str, settings_basis: str) -> float:
    """A MIG profile's share as a planner prices it (`planning_basis`)."""
    return raw_mig_share(model, profile, planning_basis(settings_basis))


WHOLE = "whole"
"""What the planners (a recommendation's right size, the profile catalog) name a whole card
where a MIG profile would stand."""


def billed_share(model: str, profile: str, settings_basis: str) -> float:
    """The share a planned device bills: a whole card (`WHOLE`) 1.0, a MIG profile its
    `planned_share`."""
    return 1.0 if profile == WHOLE else planned_share(model, profile, settings_basis)


def mig_share_table(pairs: Iterable[tuple[str, str]], basis: str) -> pl.DataFrame:
    """One row per (model, profile) with its raw share."""
    if basis not in MIG_BASES:
        raise InputError(f"sharing.mig_share_basis {basis!r}: expected one of {', '.join(MIG_BASES)}")
    rows = sorted(set(pairs))
    return pl.DataFrame(
        {
            "model": [m for m, _ in rows],
            "profile": [p for _, p in rows],
            "mig_share": [raw_mig_share(m, p, basis) for m, p in rows],
        },
        schema={"model": pl.String, "profile": pl.String, "mig_share": pl.Float64},
    )


def layout_factors(instances: pl.DataFrame, models: dict[str, str]) -> pl.DataFrame:
    """For `max_normalized`: per MIG instance, the factor its raw share is divided by.

    The factor is the largest sum of raw shares of the instances living on the card at any
    moment of this instance's life (at least 1). `instances` has the `mig_instances` columns;
    `models` maps uuid → model.
    """
    by_gpu: dict[str, list[tuple[int, str, datetime, datetime, float]]] = defaultdict(list)
    for row in instances.iter_rows(named=True):
        model = models.get(row["uuid"])
        if model is None:
            continue
        share = raw_mig_share(model, row["profile"], "max_normalized")
        by_gpu[row["uuid"]].append(
            (row["gpu_i_id"], row["profile"], row["start_ts"], row["end_ts"], share)
        )
    out: list[tuple[str, int, str, float]] = []
    for uuid, spans in by_gpu.items():
        for gi, profile, start, end, _ in spans:
            best = 1.0
            for moment in {s for _, _, s, e, _ in spans if start <= s < end} | {start}:
                total = sum(sh for _, _, s, e, sh in spans if s <= moment < e)
                best = max(best, total)
            out.append((uuid, gi, profile, best))
    return pl.DataFrame(
        out, schema={"uuid": pl.String, "gpu_i_id": pl.Int32, "profile": pl.String, "factor": pl.Float64},
        orient="row",
    )


def _number(value: object) -> float | None:
    try:
        return float(str(value).rstrip("%"))
    except (TypeError, ValueError):
        return None


def vgpu_request(requests_json: str | None) -> tuple[float | None, float | None, float | None]:
    """(gpucores %, gpumem MiB, gpumem %) declared in a pod's GPU requests, None where absent."""
    if not requests_json:
        return None, None, None
    try:
        data = json.loads(requests_json)
    except json.JSONDecodeError:
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    return (
        _number(data.get("nvidia.com/gpucores")),
        _number(data.get("nvidia.com/gpumem")),
        _number(data.get("nvidia.com/gpumem-percentage")),
    )


def vgpu_share_expr(
    cores: str = "req_cores", mem_mib: str = "req_mem_mib", mem_pct: str | None = "req_mem_pct",
    memory: str = "memory_mib",
) -> pl.Expr:
    """Declared fraction: the larger of `cores` / 100 and `mem_mib` / `memory` (and `mem_pct` /
    100), clipped to the card; NULL where none is known. The columns default to the pod's
    requests; HAMi's allocations pass their own (`analytics.devices.vgpu`)."""
    terms = [pl.col(cores) / 100.0, pl.col(mem_mib) / pl.col(memory)]
    if mem_pct is not None:
        terms.append(pl.col(mem_pct) / 100.0)
    return pl.max_horizontal(*terms).clip(0.0, 1.0)


def clamp_to_card(frame: pl.DataFrame, hour_length: pl.Expr) -> pl.DataFrame:
    """Scale shares down where a card's held card-hours in an hour exceed the hour.

    `frame` has uuid, ts, held_hours and share; `hour_length` is the part of each hour inside
    the window, in hours.
    """
    totals = frame.group_by(["uuid", "ts"]).agg(
        (pl.col("held_hours") * pl.col("share")).sum().alias("_held_card_hours")
    )
    return (
        frame.join(totals, on=["uuid", "ts"], how="left")
        .with_columns(
            pl.when(pl.col("_held_card_hours") > hour_length + 1e-9)
            .then(pl.col("share") * hour_length / pl.col("_held_card_hours"))
            .otherwise(pl.col("share"))
            .alias("share")
        )
        .drop("_held_card_hours")
    )
