"""Who holds what, when: the schedule of pods on slots for the whole window.

The schedule is small (one record per pod, not per sample) and is drawn once, up front, from
a seeded generator per pool, so it is the same however the samples are later chunked:

1. Cut each node into *groups* of slots a job holds together: on exclusive pools a
   multi-GPU training job holds 2, 4 or 8 cards of one node; on shared pools (MIG, time-slice,
   vGPU) every slot is its own group. A group's workload class is drawn from the pool's mix;
   a few groups are never used (free capacity).
2. Run a renewal process per group over the slot's lifetime: hold for a class-typical
   duration, leave it free for a gap, repeat. The process starts before the window so pods
   are already running at its start. Inference services restart (a new pod after a short
   gap); a MIG reconfiguration ends the pods on the destroyed instances.
3. Give every pod its tenant (team namespace or, now and then, an unlabeled one), Kueue queue,
   owner, requests and activity parameters (level, phase probability, memory footprint,
   vLLM token rates).
"""

from __future__ import annotations

import itertools
import random
import string
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuledger.simulator.field_hardware import same_span
from gpuledger.simulator.fleet import WORKLOAD_CLASSES, FleetSpec, PoolSpec
from gpuledger.simulator.hami import hami_request
from gpuledger.simulator.hardware import Hardware, Slot
from gpuledger.simulator.tenants import Namespace, Tenants
from gpuledger.simulator.timebase import Timebase

TRAINING, INFERENCE, NOTEBOOK, BATCH_EVAL, SMALL_JOB = range(5)
CLASS_CODE = {name: i for i, name in enumerate(WORKLOAD_CLASSES)}

_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"
_USERS = ("alice", "bruno", "chen", "dana", "eli", "fatima", "gus", "hana", "ivan", "jo", "kai",
          "lena", "mo", "nina", "omar", "pia", "raj", "sara", "tomas", "uma", "vik", "wen")


@dataclass(frozen=True, slots=True)
class ClassFacts:
    """Typical hold (lognormal median hours, sigma, clip) and gap (mean hours) of a class."""

    hold_median_h: float
    hold_sigma: float
    hold_min_h: float
    hold_max_h: float
    gap_mean_h: float
    container: str
    queue: str | None


CLASSES: dict[int, ClassFacts] = {
    TRAINING: ClassFacts(10.0, 0.9, 1.0, 72.0, 1.5, "trainer", "train"),
    INFERENCE: ClassFacts(72.0, 0.8, 6.0, 400.0, 0.04, "vllm", None),
    NOTEBOOK: ClassFacts(8.0, 0.7, 1.0, 48.0, 5.0, "notebook", None),
    BATCH_EVAL: ClassFacts(1.5, 0.6, 0.25, 8.0, 1.0, "evaluator", "batch"),
    SMALL_JOB: ClassFacts(2.0, 0.8, 0.2, 12.0, 1.0, "worker", "batch"),
}


@dataclass
class Pods:
    """Column lists of pod attributes (index = pod id)."""

    name: list[str] = field(default_factory=list)
    namespace: list[int] = field(default_factory=list)
    cls: list[int] = field(default_factory=list)
    node: list[int] = field(default_factory=list)
    pool: list[int] = field(default_factory=list)
    queue: list[str | None] = field(default_factory=list)
    owner_kind: list[str] = field(default_factory=list)
    owner_name: list[str] = field(default_factory=list)
    requests: list[dict[str, int]] = field(default_factory=list)
    labels: list[dict[str, str]] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    level: list[float] = field(default_factory=list)
    p2: list[float] = field(default_factory=list)
    mem_frac: list[float] = field(default_factory=list)
    model_name: list[str | None] = field(default_factory=list)
    prompt_rate: list[float] = field(default_factory=list)
    gen_ratio: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    resource: list[str] = field(default_factory=list)
    amount: list[int] = field(default_factory=list)
    uid: list[str] = field(default_factory=list)
    hami: list[tuple[int, int] | None] = field(default_factory=list)  # vGPU: HAMi's (MiB, cores %)

    def __len__(self) -> int:
        return len(self.name)


@dataclass
class Schedule:
    pods: Pods
    alloc_slot: np.ndarray
    alloc_pod: np.ndarray
    alloc_start: np.ndarray
    alloc_end: np.ndarray
    # Per-pod arrays for vectorized activity.
    pod_cls: np.ndarray
    pod_level: np.ndarray
    pod_p2: np.ndarray
    pod_mem: np.ndarray
    pod_start: np.ndarray


@dataclass
class _Env:
    """What every step of schedule building reads (and the pods it appends to)."""

    spec: FleetSpec
    hw: Hardware
    tenants: Tenants
    tb: Timebase
    namer: _Namer
    pods: Pods
    allocs: list[tuple[int, int, int, int]]


@dataclass
class _Group:
    slots: list[int]
    cls: int | None
    node: int
    pool: int
    start: int
    end: int


def build_schedule(
    spec: FleetSpec, hw: Hardware, tenants: Tenants, tb: Timebase, seed: int
) -> Schedule:
    env = _Env(spec, hw, tenants, tb, _Namer(set()), Pods(), [])
    for p_idx, pool in enumerate(spec.pools):
        rng = random.Random(seed * 1_000_003 + p_idx)
        for group in _groups(hw, pool, p_idx, rng):
            if group.cls is not None:
                _run_group(env, rng, pool, group)
    pods = env.pods
    arr = np.array(env.allocs, dtype=np.int64).reshape(-1, 4)
    order = np.lexsort((arr[:, 0], arr[:, 2]))
    arr = arr[order]
    return Schedule(
        pods=pods,
        alloc_slot=arr[:, 0].copy(), alloc_pod=arr[:, 1].copy(),
        alloc_start=arr[:, 2].copy(), alloc_end=arr[:, 3].copy(),
        pod_cls=np.array(pods.cls, dtype=np.int8),
        pod_level=np.array(pods.level, dtype=np.float64),
        pod_p2=np.array(pods.p2, dtype=np.float64),
        pod_mem=np.array(pods.mem_frac, dtype=np.float64),
        pod_start=np.array(pods.start, dtype=np.int64),
    )


# 1. Groups -------------------------------------------------------------------------------
def _draw_class(pool: PoolSpec, rng: random.Random) -> int | None:
    if rng.random() < pool.free_fraction:
        return None
    names = list(pool.workloads)
    return CLASS_CODE[rng.choices(names, weights=[pool.workloads[n] for n in names])[0]]


_GROUP_SIZES = {TRAINING: ((8, 4, 2, 1), (0.4, 0.3, 0.2, 0.1)),
                INFERENCE: ((2, 1), (0.3, 0.7)), BATCH_EVAL: ((2, 1), (0.4, 0.6))}


def _groups(hw: Hardware, pool: PoolSpec, p_idx: int, rng: random.Random) -> list[_Group]:
    slots_by_gpu: dict[int, list[int]] = {}
    for s_idx, slot in enumerate(hw.slots):
        if hw.gpus[slot.gpu].pool == p_idx:
            slots_by_gpu.setdefault(slot.gpu, []).append(s_idx)
    out: list[_Group] = []
    for n_idx, node in enumerate(hw.nodes):
        if node.pool != p_idx:
            continue
        node_slots = [s for g in node.gpus + node.replacements for s in slots_by_gpu.get(g, [])]
        if pool.sharing != "exclusive":
            for s in node_slots:
                slot = hw.slots[s]
                out.append(_Group([s], _draw_class(pool, rng), n_idx, p_idx, slot.start, slot.end))
            continue
        i = 0
        while i < len(node_slots):
            cls = _draw_class(pool, rng)
            size = 1
            if cls in _GROUP_SIZES:
                sizes, probs = _GROUP_SIZES[cls]
                size = rng.choices(sizes, weights=probs)[0]
            slot = hw.slots[node_slots[i]]
            size = min(size, same_span(hw, node_slots, i))
            out.append(_Group(node_slots[i:i + size], cls, n_idx, p_idx, slot.start, slot.end))
            i += size
    return out


# 2. Renewal process ----------------------------------------------------------------------
def _run_group(env: _Env, rng: random.Random, pool: PoolSpec, group: _Group) -> None:
    assert group.cls is not None
    tb, tenants = env.tb, env.tenants
    facts = CLASSES[group.cls]
    hold_med = tb.hours_to_steps(facts.hold_median_h)
    gap_mean = tb.hours_to_steps(facts.gap_mean_h)
    # A service or a notebook keeps its tenant and identity across restarts.
    sticky_ns = _draw_namespace(tenants, rng, group.cls)
    service = _service_identity(env.spec, rng, env.namer, group.cls)
    t = group.start
    if group.start == 0:
        t = -int(rng.random() * (hold_med + gap_mean))
    else:
        t += max(1, int(rng.expovariate(1 / gap_mean)))
    while t < group.end:
        hold_h = min(max(facts.hold_median_h * rng.lognormvariate(0, facts.hold_sigma),
                         facts.hold_min_h), facts.hold_max_h)
        hold = tb.hours_to_steps(hold_h)
        gap = max(1, int(rng.expovariate(1 / gap_mean)))
        end = min(t + hold, group.end)
        ns = sticky_ns if group.cls in (INFERENCE, NOTEBOOK) else _draw_namespace(tenants, rng, group.cls)
        params = _activity_params(rng, group.cls)
        if end > 0:
            pod_id = len(env.pods)
            _add_pod(env, rng, pool, group, ns_idx=ns, service=service, start=t, end=end, params=params)
            for s in group.slots:
                env.allocs.append((s, pod_id, t, end))
        t += hold + gap


def _draw_namespace(tenants: Tenants, rng: random.Random, cls: int) -> int:
    labeled, weights, unlabeled = _CHOICE_CACHE.get(tenants, cls == INFERENCE)
    if unlabeled and rng.random() < tenants.unlabeled_fraction:
        return rng.choice(unlabeled)
    return rng.choices(labeled, cum_weights=weights)[0]


def _namespace_choices(tenants: Tenants, serving: bool) -> tuple[list[int], list[float], list[int]]:
    """Labeled namespaces with cumulative team weights, and unlabeled ones, for a kind of work."""
    candidates = [i for i, ns in enumerate(tenants.namespaces) if ns.serving == serving]
    unlabeled = [i for i in candidates if tenants.namespaces[i].team is None]
    labeled = [i for i in candidates if tenants.namespaces[i].team is not None]
    if not unlabeled:
        unlabeled = [i for i, ns in enumerate(tenants.namespaces) if ns.team is None]
    weights = list(itertools.accumulate(
        tenants.team_weights[tenants.namespaces[i].team or ""] for i in labeled
    ))
    return labeled, weights, unlabeled


def _service_identity(spec: FleetSpec, rng: random.Random, namer: _Namer, cls: int) -> dict[str, Any]:
    if cls == INFERENCE:
        model = rng.choice(spec.inference_models)
        short = model.split("/")[-1].lower().replace(".", "-").replace("_", "-")
        deploy = namer.unique(f"{short[:40].rstrip('-')}", rng, 4)
        return {"model": model, "deploy": deploy, "rs": f"{deploy}-{namer.suffix(rng, 10)}"}
    if cls == NOTEBOOK:
        return {"user": rng.choice(_USERS)}
    return {}


def _activity_params(rng: random.Random, cls: int) -> dict[str, float]:
    """Level, phase probability and memory footprint of one pod (see activity.py)."""
    if cls == TRAINING:
        return {"level": rng.uniform(0.75, 0.95), "p2": rng.uniform(0.0, 0.12),
                "mem": rng.uniform(0.7, 0.95)}
    if cls == INFERENCE:
        level = rng.uniform(0.04, 0.15) if rng.random() < 0.3 else rng.uniform(0.3, 0.9)
        return {"level": level, "p2": 0.0, "mem": rng.uniform(0.85, 0.92)}
    if cls == NOTEBOOK:
        return {"level": rng.uniform(0.2, 0.6), "p2": rng.uniform(0.05, 0.35),
                "mem": rng.uniform(0.1, 0.6)}
    if cls == BATCH_EVAL:
        return {"level": rng.uniform(0.55, 0.9), "p2": 0.0, "mem": rng.uniform(0.4, 0.9)}
    return {"level": rng.uniform(0.25, 0.75), "p2": rng.uniform(0.0, 0.15),
            "mem": rng.uniform(0.2, 0.8)}


# 3. Pod records --------------------------------------------------------------------------
def _add_pod(
    env: _Env, rng: random.Random, pool: PoolSpec, group: _Group, *, ns_idx: int,
    service: dict[str, Any], start: int, end: int, params: dict[str, float],
) -> None:
    hw, namer, pods = env.hw, env.namer, env.pods
    cls = group.cls
    assert cls is not None
    ns: Namespace = env.tenants.namespaces[ns_idx]
    facts = CLASSES[cls]
    slot: Slot = hw.slots[group.slots[0]]
    if cls == INFERENCE:
        owner_kind, owner = "ReplicaSet", service["rs"]
        name = f"{owner}-{namer.suffix(rng, 5)}"
        labels = {"app": service["deploy"], "app.kubernetes.io/component": "inference"}
    elif cls == NOTEBOOK:
        owner_kind = "StatefulSet"
        owner = namer.unique(f"nb-{service['user']}", rng, 4)
        name = f"{owner}-0"
        labels = {"app": "notebook", "notebook-name": owner}
    else:
        prefix = {TRAINING: f"{ns.name}-train", BATCH_EVAL: "eval", SMALL_JOB: f"{ns.name}-job"}[cls]
        owner_kind = "Job"
        owner = namer.unique(prefix, rng, 6)
        name = f"{owner}-{namer.suffix(rng, 5)}"
        labels = {"batch.kubernetes.io/job-name": owner, "app.kubernetes.io/component": facts.container}
    name = namer.claim(name)
    if queue := facts.queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    requests, resource, amount = _requests(pool, slot, len(group.slots))
    vgpu = hami_request(len(pods), slot, hw.gpus[slot.gpu].memory_mib) if pool.sharing == "vgpu" else None
    requests, allocated = vgpu if vgpu else (requests, None)
    pods.name.append(name)
    pods.namespace.append(ns_idx)
    pods.cls.append(cls)
    pods.node.append(group.node)
    pods.pool.append(group.pool)
    pods.queue.append(queue)
    pods.owner_kind.append(owner_kind)
    pods.owner_name.append(owner)
    pods.requests.append(requests)
    pods.labels.append(labels)
    pods.start.append(start)
    pods.end.append(end)
    pods.level.append(float(params["level"]))
    pods.p2.append(float(params["p2"]))
    pods.mem_frac.append(float(params["mem"]) * (slot.share if pool.sharing == "timeslice" else 1.0))
    pods.model_name.append(service.get("model"))
    pods.prompt_rate.append(float(rng.uniform(200, 3000)) if cls == INFERENCE else 0.0)
    pods.gen_ratio.append(float(rng.uniform(0.15, 0.6)) if cls == INFERENCE else 0.0)
    median_wait = 600.0 if cls == TRAINING else 120.0
    pods.wait_s.append(min(6 * 3600.0, median_wait * rng.lognormvariate(0, 1.2)) if queue else 0.0)
    pods.resource.append(resource)
    pods.amount.append(amount)
    pods.uid.append(_uid(rng))
    pods.hami.append(allocated)


def _requests(pool: PoolSpec, slot: Slot, cards: int) -> tuple[dict[str, int], str, int]:
    if pool.sharing == "mig":
        assert slot.profile is not None
        res = f"nvidia.com/mig-{slot.profile}"
        return {res: 1}, res, 1
    cards = 1 if pool.sharing == "vgpu" else cards  # vGPU requests: `simulator.hami.hami_request`
    return {"nvidia.com/gpu": cards}, "nvidia.com/gpu", cards


def _uid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


class _ChoiceCache:
    """Namespace choice tables per `Tenants` (a frozen value, so it can key a cache). The
    latest tables per kind of work are found by identity first: hashing a `Tenants` hashes
    every namespace, and the lookup runs once per pod drawn."""

    def __init__(self) -> None:
        self._tables: dict[tuple[Tenants, bool], tuple[list[int], list[float], list[int]]] = {}
        self._recent: dict[bool, tuple[Tenants, tuple[list[int], list[float], list[int]]]] = {}

    def get(self, tenants: Tenants, serving: bool) -> tuple[list[int], list[float], list[int]]:
        recent = self._recent.get(serving)
        if recent is not None and recent[0] is tenants:
            return recent[1]
        key = (tenants, serving)
        if key not in self._tables:
            if len(self._tables) > 64:
                self._tables.clear()
            self._tables[key] = _namespace_choices(tenants, serving)
        self._recent[serving] = (tenants, self._tables[key])
        return self._tables[key]


_CHOICE_CACHE = _ChoiceCache()


class _Namer:
    """Kubernetes-looking random suffixes, never reusing a name (pod keys must be unique)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def suffix(self, rng: random.Random, n: int) -> str:
        return "".join(rng.choices(_SUFFIX, k=n))

    def unique(self, prefix: str, rng: random.Random, n: int) -> str:
        while True:
            name = f"{prefix}-{self.suffix(rng, n)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def claim(self, name: str) -> str:
        candidate, i = name, 1
        while candidate in self.taken:
            candidate = f"{name}{string.ascii_lowercase[i % 26]}"
            i += 1
        self.taken.add(candidate)
        return candidate
