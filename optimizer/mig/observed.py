"""The fleet and its MIG demand as the warehouse saw them last.

Fleet (tables `gpus`, `nodes`, `mig_instances`, `gpu_samples`, `pods`, read through
`warehouse.queries.mig`):
1. GPUs of the planned pools (default: pools whose sharing mode is `mig`; time-sliced and vGPU
   cards, and nodes on the DRA plane, are never planned: `analytics.devices.dra_plan`); a MIG
   card's layout is its MIG instances alive at the last observation, an exclusive card is whole
   (MIG disabled).
2. Busy instances: pods on each device at the latest `gpu_samples` time. A pod is evictable
   unless it has no owner (nothing would recreate it) or carries the label
   `gpuledger.io/evictable: "false"`.
3. Maintenance window: a node is inside unless its label `gpuledger.io/maintenance-window`
   is `closed`, or `nodes` globs are given and it matches none.

Demand: right-sized profiles from `analytics.workloads.recommend.rightsized_demand` (peak concurrency of
the workloads at their recommended size) when that module is there; otherwise the instances
that held a pod at any time in the lookback window (and the whole cards that did).
`Demand.source` says which was used.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import polars as pl

from gpuledger.analytics.devices.dra_plan import dra_plane_nodes
from gpuledger.analytics.workloads.profiles import workload_class
from gpuledger.analytics.workloads.requested import owned_by
from gpuledger.core.errors import InputError
from gpuledger.core.frames import WHOLE_GPU
from gpuledger.core.mig import canonical_model, catalog, shape_of
from gpuledger.optimizer.mig.inputs import BusyInstance, Config, Demand, Fleet, Gpu, ModelDemand, Node
from gpuledger.optimizer.plan.render import duration_text
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries import mig as queries

EVICTABLE_LABEL = "gpuledger.io/evictable"
WINDOW_LABEL = "gpuledger.io/maintenance-window"
ALIVE_SLACK = timedelta(minutes=10)


def load_fleet_from_warehouse(
    wh: Warehouse, *, pools: Sequence[str] = (), nodes: Sequence[str] = ()
) -> Fleet:
    """Steps 1-3 of the module docstring."""
    gpus = queries.gpus_with_nodes(wh)
    if gpus.is_empty():
        raise InputError(f"{wh.path}: table gpus is empty; collect inventory first (or pass --fleet)")
    dra = dra_plane_nodes(wh)  # never planned as layouts (docs/decisions/0087)
    rows = [r for r in gpus.iter_rows(named=True)
            if _planned(r, pools) and r["node"] not in dra and r["sharing_mode"] != "dra"]
    if not rows:
        wanted = ", ".join(pools) if pools else "pools in MIG mode"
        raise InputError(f"{wh.path}: no GPUs of {wanted} with MIG facts in table gpus "
                         "(choose pools with --pool)")
    layouts = _alive_layouts(wh)
    busy = _busy(wh)
    by_node: dict[str, list[Gpu]] = defaultdict(list)
    meta: dict[str, dict[str, Any]] = {}
    for r in rows:
        model = canonical_model(r["model"])
        config: Config = None if r["sharing_mode"] != "mig" else layouts.get(r["uuid"], ())
        by_node[r["node"]].append(Gpu(
            node=r["node"], index=int(r["gpu_index"]), model=model, config=config, uuid=r["uuid"],
            busy=_consistent(busy.get(r["uuid"], []), config),
        ))
        meta[r["node"]] = r
    out = []
    for name in sorted(by_node):
        r = meta[name]
        labels = json.loads(r["labels"]) if r["labels"] else {}
        inside = labels.get(WINDOW_LABEL) != "closed" and (
            not nodes or any(fnmatch.fnmatch(name, g) for g in nodes)
        )
        out.append(Node(name=name, gpus=tuple(by_node[name]), in_maintenance_window=inside,
                        mig_config=r["mig_config"], resource_version=r["resource_version"]))
    return Fleet(tuple(out), source=f"warehouse {wh.path}")


def _consistent(busy: list[BusyInstance], config: Config) -> tuple[BusyInstance, ...]:
    """Busy pods that fit the observed layout (samples and instance spans may disagree briefly)."""
    if config is None:
        return tuple(b for b in busy if b.profile is None)[:1]
    room = Counter(dict(config))
    kept = []
    for b in busy:
        if b.profile is not None and room[b.profile] > 0:
            room[b.profile] -= 1
            kept.append(b)
    return tuple(kept)


def _planned(row: dict[str, Any], pools: Sequence[str]) -> bool:
    if canonical_model(row["model"]) not in catalog() or row["sharing_mode"] in ("timeslice", "vgpu"):
        return False
    if pools:
        return row["pool"] in pools
    return row["sharing_mode"] == "mig"


def _alive_layouts(wh: Warehouse) -> dict[str, Config]:
    """Per MIG card, the profile counts of the instances alive at the last observation."""
    last = queries.last_instance_end(wh)
    if last is None:
        return {}
    frame = queries.instance_counts_since(wh, last - ALIVE_SLACK)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in frame.iter_rows(named=True):
        counts[r["uuid"]][r["profile"]] += int(r["n"])
    return {uuid: shape_of(c) for uuid, c in counts.items()}


def _busy(wh: Warehouse) -> dict[str, list[BusyInstance]]:
    """Pods on each device at the latest sample time, with whether they may be evicted."""
    frame = queries.holders_at_last_sample(wh)
    out: dict[str, list[BusyInstance]] = defaultdict(list)
    seen: set[tuple[str, int, str, str]] = set()
    # only the kind matters here: the pod name stands in for the owner's (not selected)
    frame = owned_by(frame.with_columns(pl.col("pod").alias("owner_name"))).with_columns(
        workload_class(act_mean=None))
    for r in frame.iter_rows(named=True):
        key = (r["uuid"], r["gpu_i_id"], r["namespace"], r["pod"])
        if key in seen:
            continue
        seen.add(key)
        labels = json.loads(r["labels"]) if r["labels"] else {}
        evictable = bool(r["owner_kind"]) and str(labels.get(EVICTABLE_LABEL, "true")).lower() != "false"
        profile = None if r["gpu_i_id"] == WHOLE_GPU else r["mig_profile"]
        serving = r["workload_class"] == "serving"
        out[r["uuid"]].append(BusyInstance(profile, r["namespace"], r["pod"], evictable, serving))
    return out


def observed_demand(wh: Warehouse, fleet: Fleet, lookback: timedelta) -> Demand:
    """Instances (and whole cards) of the fleet that held a pod within `lookback` of the last sample."""
    last = queries.last_sample_time(wh)
    if last is None:
        raise InputError(f"{wh.path}: table gpu_samples is empty; no demand can be observed (pass --demand)")
    frame = queries.held_devices(wh, last, lookback)
    model_of = {g.uuid: g.model for g in fleet.gpus}
    whole_of = {g.uuid: g.config is None for g in fleet.gpus}
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    whole: Counter[str] = Counter()
    for r in frame.iter_rows(named=True):
        uuid = r["uuid"]
        if uuid not in model_of:
            continue
        if r["gpu_i_id"] == WHOLE_GPU:
            if whole_of[uuid]:
                whole[model_of[uuid]] += 1
        elif r["mig_profile"]:
            counts[model_of[uuid]][r["mig_profile"]] += 1
    models = sorted(set(counts) | set(whole))
    return Demand(
        tuple(ModelDemand(m, dict(sorted(counts[m].items())), whole[m]) for m in models),
        source=f"observed: instances that held a pod in the {duration_text(lookback)} before "
               f"{last:%Y-%m-%d %H:%M} UTC",
        complete=True,
    )


def recommended_demand(
    wh: Warehouse, fleet: Fleet, settings: Any, lookback: timedelta, *, peak: bool = True,
    catalog_only: dict[str, tuple[str, ...]] | None = None,
) -> Demand | None:
    """Right-sized demand from `analytics.workloads.recommend.rightsized_demand` over the lookback window
    (peak concurrency by default), or None when the warehouse has no samples. With
    `catalog_only` (model -> standard profiles, e.g. from `analytics.advice.profile_catalog`)
    each model's instances are rounded up onto its catalog, so the plan uses only those."""
    from gpuledger.analytics.workloads.recommend import rightsized_demand
    from gpuledger.core.window import Window

    last = queries.last_sample_time(wh)
    if last is None:
        return None
    end = last + timedelta(minutes=1)
    result = rightsized_demand(wh, Window(end - lookback, end), settings)
    column = "peak_count" if peak else "count"
    planned = {g.model for g in fleet.gpus}
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    whole: Counter[str] = Counter()
    for r in _rows(result):
        model = canonical_model(str(r["model"]))
        n = int(r.get(column) or r.get("count") or 0)
        if model not in planned or n <= 0:
            continue
        if r.get("profile") in (None, "whole"):
            whole[model] += n
        else:
            counts[model][str(r["profile"])] += n
    if catalog_only:
        _onto_catalog(counts, whole, catalog_only)
    models = sorted(set(counts) | set(whole))
    return Demand(
        tuple(ModelDemand(m, dict(sorted(counts[m].items())), whole[m]) for m in models),
        source=f"analytics.workloads.recommend.rightsized_demand ({column} over the "
               f"{duration_text(lookback)} before {end:%Y-%m-%d %H:%M} UTC)",
        complete=True,
    )


def _onto_catalog(
    counts: dict[str, Counter[str]], whole: Counter[str], catalogs: dict[str, tuple[str, ...]],
) -> None:
    """Round each model's profile counts onto its catalog, in place (instances no catalog
    profile holds become whole cards)."""
    from gpuledger.analytics.advice.profile_catalog import round_to_catalog

    for model in list(counts):
        if model in catalogs:
            rounded, extra = round_to_catalog(model, counts[model], catalogs[model])
            counts[model] = Counter(rounded)
            whole[model] += extra


def _rows(result: Any) -> list[dict[str, Any]]:
    if hasattr(result, "iter_rows"):
        return list(result.iter_rows(named=True))
    return [dict(r) for r in result]
