"""What the MIG optimizer plans over: the fleet as it is, and the instances that are needed.

Both come from files (`--fleet`, `--demand`, for what-if runs) or from the warehouse
(`optimizer.mig.observed`); either way they end up in these frozen dataclasses, validated
against the placement rules of `core.mig` before any solver runs, so a bad input gets one line
that names the node, GPU or profile at fault.

A GPU's configuration is `None` when MIG is disabled (a whole card) or a `Shape` (profile
counts, possibly empty) when MIG is enabled.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuledger.core.errors import InputError
from gpuledger.core.mig import (
    COMPUTE_SLICES,
    GpuModel,
    Profile,
    Shape,
    canonical_model,
    catalog,
    gpu_model,
    parse_profile_name,
    shape_of,
)
from gpuledger.core.yamlfile import load_yaml_file, refuse_unknown_keys

MAX_GPUS_PER_NODE = 64
MAX_FLEET_GPUS = 100_000
MAX_INSTANCES = 7 * MAX_FLEET_GPUS
"""Ceilings of a what-if file: far above any real node or fleet, low enough that a typo like
`gpus: 1000000000` is refused instead of building a billion GPUs."""
_NODE_KEYS = ("name", "model", "mig_config", "gpus", "layout", "maintenance", "resource_version")
_GPU_KEYS = ("index", "layout", "busy", "uuid")
_BUSY_KEYS = ("pod", "profile", "evictable", "namespace", "serving")
_DEMAND_KEYS = ("model", "profiles", "whole", "workloads")
_WORKLOAD_KEYS = ("name", "memory_mib", "compute", "replicas", "whole")

Config = Shape | None
"""A GPU's MIG configuration: None = MIG disabled (whole card), else profile counts."""


@dataclass(frozen=True, slots=True)
class BusyInstance:
    """A pod holding one MIG instance (profile) or the whole card (profile None)."""

    profile: str | None
    namespace: str
    pod: str
    evictable: bool = True
    serving: bool = False
    """A serving workload (Deployment/StatefulSet, `analytics.workloads.profiles.workload_class`): its
    eviction interrupts live traffic, so the plan's effect names it."""


@dataclass(frozen=True, slots=True)
class Gpu:
    node: str
    index: int
    model: str
    config: Config
    uuid: str | None = None
    busy: tuple[BusyInstance, ...] = ()

    @property
    def pinned(self) -> bool:
        """A GPU running a non-evictable pod keeps its layout."""
        return any(not b.evictable for b in self.busy)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpus: tuple[Gpu, ...]
    in_maintenance_window: bool = True
    mig_config: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[Node, ...]
    source: str = "file"

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return tuple(g for n in self.nodes for g in n.gpus)

    def models(self) -> list[str]:
        return sorted({g.model for g in self.gpus})


@dataclass(frozen=True)
class ModelDemand:
    """Instances needed on one GPU model: profile counts plus whole (MIG-disabled) cards."""

    model: str
    profiles: Mapping[str, int] = field(default_factory=dict)
    whole: int = 0

    def compute_slices(self) -> int:
        m = gpu_model(self.model)
        return sum(m.profiles[p].compute * n for p, n in self.profiles.items()) + COMPUTE_SLICES * self.whole

    def memory_slices(self) -> int:
        m = gpu_model(self.model)
        return sum(m.profiles[p].memory * n for p, n in self.profiles.items()) + 8 * self.whole


@dataclass(frozen=True)
class Demand:
    models: tuple[ModelDemand, ...]
    source: str = "file"
    complete: bool = False
    """True when the demand covers every model of the fleet (warehouse demand): a model with no
    demand then has its idle MIG GPUs freed. A what-if file only plans the models it names."""

    def for_model(self, model: str) -> ModelDemand:
        for d in self.models:
            if d.model == model:
                return d
        return ModelDemand(model)


# 1. Parsing configs -----------------------------------------------------------------------------
def parse_config(raw: Any, model: GpuModel, where: str) -> Config:
    """`whole` / `disabled` / false → None; a mapping of profile counts → a validated Shape."""
    if raw is None or raw is False or (isinstance(raw, str) and raw.lower() in ("whole", "disabled", "off")):
        return None
    if isinstance(raw, str) and raw.lower() in ("empty", "enabled"):
        return ()
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: layout must be 'whole', 'empty' or a mapping profile: count, got {raw!r}")
    counts: dict[str, int] = {}
    for name, count in raw.items():
        if name not in model.profiles:
            known = ", ".join(model.profiles)
            raise InputError(f"{where}: MIG profile {name!r} does not exist on {model.name} (known: {known})")
        counts[str(name)] = _count(count, where, f"count of {name}", COMPUTE_SLICES)
    shape = shape_of(counts)
    if shape and not _placeable(model, shape):
        text = ", ".join(f"{n}: {c}" for n, c in shape)
        raise InputError(
            f"{where}: layout {{{text}}} is impossible on a {model.name} GPU (no valid placement)"
        )
    return shape


def _placeable(model: GpuModel, shape: Shape) -> bool:
    return shape in _valid_shapes(model.name)


@lru_cache(maxsize=64)
def _valid_shapes(model: str) -> frozenset[Shape]:
    """Every placeable shape of a model, generated once: regenerating them per GPU made a
    4,000-GPU fleet file take minutes to read."""
    return frozenset(gpu_model(model).shapes(media_extensions=True))


def _count(value: Any, where: str, what: str, ceiling: int) -> int:
    """A non-negative integer count no larger than `ceiling` (bools are not counts)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= ceiling:
        raise InputError(f"{where}: {what} must be a non-negative integer (at most {ceiling:,}), "
                         f"got {value!r}")
    return value


def resolve_model(name: Any, where: str) -> GpuModel:
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: 'model' is required (one of {', '.join(catalog())})")
    canonical = canonical_model(name)
    if canonical not in catalog():
        raise InputError(f"{where}: unknown GPU model {name!r} (known: {', '.join(catalog())})")
    return catalog()[canonical]


# 2. The fleet file ------------------------------------------------------------------------------
def load_fleet(path: Path) -> Fleet:
    """Read a fleet file (format in docs/guide/optimizer.md)."""
    data = load_yaml_file(path, what="fleet")
    if not isinstance(data, Mapping) or not isinstance(data.get("nodes"), list):
        raise InputError(f"{path}: expected a mapping with a list 'nodes'")
    refuse_unknown_keys(data, ("nodes",), str(path))
    return fleet_from_dict(data, str(path))


def fleet_from_dict(data: Mapping[str, Any], source: str = "file") -> Fleet:
    nodes = []
    seen: set[str] = set()
    for i, raw in enumerate(data.get("nodes") or []):
        where = f"{source}: nodes[{i}]"
        if not isinstance(raw, Mapping) or not raw.get("name"):
            raise InputError(f"{where}: each node needs a 'name'")
        name = str(raw["name"])
        if name in seen:
            raise InputError(f"{where}: node {name!r} appears twice")
        seen.add(name)
        refuse_unknown_keys(raw, _NODE_KEYS, f"{source}: node {name}")
        nodes.append(_node(raw, f"{source}: node {name}"))
    if not nodes:
        raise InputError(f"{source}: the fleet has no nodes")
    total = sum(len(n.gpus) for n in nodes)
    if total > MAX_FLEET_GPUS:
        raise InputError(f"{source}: {total:,} GPUs; a fleet file holds at most {MAX_FLEET_GPUS:,}")
    return Fleet(tuple(nodes), source)


def _node(raw: Mapping[str, Any], where: str) -> Node:
    name = str(raw["name"])
    model = resolve_model(raw.get("model"), where)
    default_layout = raw.get("layout", "whole")
    gpus_raw = raw.get("gpus", 8)
    if isinstance(gpus_raw, int) and not isinstance(gpus_raw, bool):
        _count(gpus_raw, where, "'gpus'", MAX_GPUS_PER_NODE)
        gpus_raw = [{"index": i, "layout": default_layout} for i in range(gpus_raw)]
    if not isinstance(gpus_raw, list) or not 0 < len(gpus_raw) <= MAX_GPUS_PER_NODE:
        raise InputError(f"{where}: 'gpus' must be a count or a list of 1 to {MAX_GPUS_PER_NODE} GPUs")
    gpus = []
    indices: set[int] = set()
    for j, g in enumerate(gpus_raw):
        if not isinstance(g, Mapping):
            raise InputError(f"{where}: gpus[{j}] must be a mapping")
        refuse_unknown_keys(g, _GPU_KEYS, f"{where} gpus[{j}]")
        index = g.get("index", j)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0 or index in indices:
            raise InputError(f"{where}: gpus[{j}] has a missing, negative or repeated index {index!r}")
        indices.add(index)
        gwhere = f"{where} gpu {index}"
        config = parse_config(g.get("layout", default_layout), model, gwhere)
        busy = tuple(
            _busy(b, model, config, f"{gwhere} busy[{k}]") for k, b in enumerate(g.get("busy") or [])
        )
        _check_busy_fits(busy, config, gwhere)
        gpus.append(Gpu(node=name, index=index, model=model.name, config=config,
                        uuid=g.get("uuid"), busy=busy))
    window = raw.get("maintenance", True)
    if not isinstance(window, bool):
        raise InputError(f"{where}: 'maintenance' must be true or false (inside a maintenance window)")
    return Node(name=name, gpus=tuple(sorted(gpus, key=lambda x: x.index)), in_maintenance_window=window,
                mig_config=raw.get("mig_config"), resource_version=raw.get("resource_version"))


def _busy(raw: Any, model: GpuModel, config: Config, where: str) -> BusyInstance:
    if not isinstance(raw, Mapping) or not raw.get("pod"):
        raise InputError(f"{where}: a busy entry needs 'pod' (namespace/name or name) and 'profile'")
    refuse_unknown_keys(raw, _BUSY_KEYS, where)
    pod = str(raw["pod"])
    namespace, _, name = pod.rpartition("/")
    profile = raw.get("profile")
    if config is None:
        if profile not in (None, "whole"):
            raise InputError(f"{where}: the GPU has MIG disabled, so a pod holds it whole, not {profile!r}")
        profile = None
    elif profile not in model.profiles:
        raise InputError(f"{where}: busy profile {profile!r} does not exist on {model.name}")
    flags = {key: raw.get(key, key == "evictable") for key in ("evictable", "serving")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise InputError(f"{where}: '{key}' must be true or false")
    return BusyInstance(profile=profile, namespace=str(raw.get("namespace", namespace or "default")),
                        pod=name, evictable=flags["evictable"], serving=flags["serving"])


def _check_busy_fits(busy: tuple[BusyInstance, ...], config: Config, where: str) -> None:
    if config is None:
        if len(busy) > 1:
            raise InputError(f"{where}: {len(busy)} pods listed on a whole (MIG-disabled) GPU; at most 1")
        return
    have = dict(config)
    used = Counter(b.profile for b in busy)
    for profile, n in used.items():
        if n > have.get(str(profile), 0):
            raise InputError(
                f"{where}: {n} busy {profile} instances but the layout has {have.get(str(profile), 0)}"
            )


# 3. The demand file -----------------------------------------------------------------------------
def load_demand(path: Path) -> Demand:
    """Read a demand file (format in docs/guide/optimizer.md)."""
    data = load_yaml_file(path, what="demand")
    if not isinstance(data, Mapping) or not isinstance(data.get("demand"), list):
        raise InputError(f"{path}: expected a mapping with a list 'demand'")
    refuse_unknown_keys(data, ("demand",), str(path))
    return demand_from_dict(data, str(path))


def demand_from_dict(data: Mapping[str, Any], source: str = "file") -> Demand:
    merged: dict[str, tuple[Counter[str], int]] = {}
    for i, raw in enumerate(data.get("demand") or []):
        where = f"{source}: demand[{i}]"
        if not isinstance(raw, Mapping):
            raise InputError(f"{where}: expected a mapping with 'model'")
        refuse_unknown_keys(raw, _DEMAND_KEYS, where)
        model = resolve_model(raw.get("model"), where)
        counts, whole = merged.get(model.name, (Counter(), 0))
        profiles = raw.get("profiles") or {}
        if not isinstance(profiles, Mapping):
            raise InputError(f"{where}: 'profiles' must be a mapping profile: count")
        for name, n in profiles.items():
            if name not in model.profiles:
                raise InputError(f"{where}: MIG profile {name!r} does not exist on {model.name} "
                                 f"(known: {', '.join(model.profiles)})")
            counts[str(name)] += _count(n, where, f"count of {name}", MAX_INSTANCES)
        whole += _count(raw.get("whole", 0), where, "'whole'", MAX_FLEET_GPUS)
        workloads = raw.get("workloads") or []
        if not isinstance(workloads, list):
            raise InputError(f"{where}: 'workloads' must be a list")
        for j, wl in enumerate(workloads):
            profile, replicas = workload_profile(wl, model, f"{where} workloads[{j}]")
            if profile is None:
                whole += replicas
            else:
                counts[profile] += replicas
        merged[model.name] = (counts, whole)
    if not merged:
        raise InputError(f"{source}: the demand list is empty")
    return Demand(
        tuple(ModelDemand(m, dict(sorted((p, n) for p, n in c.items() if n)), w)
              for m, (c, w) in sorted(merged.items())),
        source,
    )


def workload_profile(raw: Any, model: GpuModel, where: str) -> tuple[str | None, int]:
    """The smallest profile that holds a workload's peak memory and p95 compute.

    Smallest = fewest compute slices, then fewest memory slices; media-extension profiles are
    never chosen. A workload that needs the whole card (compute above 4/7 with memory that no
    smaller profile holds, or `whole: true`) gets None: a MIG-disabled GPU.
    """
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: a workload needs 'memory_mib' and 'compute' (0..1)")
    refuse_unknown_keys(raw, _WORKLOAD_KEYS, where)
    replicas = _count(raw.get("replicas", 1), where, "'replicas'", MAX_INSTANCES)
    if raw.get("whole"):
        return None, replicas
    memory, compute = raw.get("memory_mib"), raw.get("compute", 0.0)
    if isinstance(memory, bool) or not isinstance(memory, int | float) or not 0 < memory < math.inf:
        raise InputError(f"{where}: 'memory_mib' must be a positive number")
    if isinstance(compute, bool) or not isinstance(compute, int | float) or not 0 <= compute <= 1:
        raise InputError(f"{where}: 'compute' must be a fraction of the card in [0, 1]")
    return smallest_profile(model, float(memory), float(compute), where), replicas


def profile_mib(profile: Profile) -> float:
    """Usable memory of a profile: the table's MiB, else 96% of the GB in its name (conservative)."""
    if profile.memory_mib:
        return float(profile.memory_mib)
    return parse_profile_name(profile.name)[1] * 1024 * 0.96


def card_mib(model: GpuModel) -> float:
    if model.memory_mib:
        return float(model.memory_mib)
    return max(profile_mib(p) for p in model.profiles.values())


def smallest_profile(model: GpuModel, memory_mib: float, compute: float, where: str) -> str | None:
    capacity = card_mib(model)
    fits = [
        p for p in model.profiles.values()
        if not p.media_extensions
        and profile_mib(p) >= memory_mib and p.compute / COMPUTE_SLICES >= compute - 1e-9
    ]
    if fits:
        best = min(fits, key=lambda p: (p.compute, p.memory, p.name))
        return None if best.compute == COMPUTE_SLICES else best.name
    if memory_mib <= capacity:
        return None
    raise InputError(
        f"{where}: needs {memory_mib:.0f} MiB but a {model.name} has {capacity:.0f} MiB: infeasible demand"
    )
