"""Why a workload waits: its stored status (`collectors.pending`), classified, never guessed.

Why a rule over stored statuses and capacity: Kueue says "insufficient unused quota", the
scheduler says "Insufficient nvidia.com/mig-3g.40gb", but neither says whether the slices exist
on a card in the wrong layout, or that no node will ever match. The classes (docs/guide/pending.md
maps each to its fix):

- `quota exhausted`: Kueue's flavor assigner found no unused quota (`insufficient unused quota
  for R in flavor F, N more needed`, reason `Pending`/`WaitingForQuota`) or Volcano would not
  enqueue (`NotInqueueable`): whose quota (the ClusterQueue of the LocalQueue) and who borrows it;
- `no capacity of that shape`: the scheduler found nodes short of the resource
  (`Insufficient R`, DRA `cannot allocate all claims`, Volcano `NotEnoughResources`) and no card
  could take it even after a layout change;
- `stranded by fragmentation`: the same, but a MIG card could take it by a layout change (the
  profile fits beside its instances, or beside its held instances once the idle ones are rebuilt;
  a whole-GPU request fits a MIG card nobody holds): which cards, which change;
- `priority / preemption`: Kueue evicted it (`Evicted` reason `Preempted`, `Preempted`) or waits
  for victims (`WaitingForPreemptedWorkloads`), or the scheduler nominated a node whose victims
  are leaving (`status.nominatedNodeName`);
- `never satisfiable`: a fractional `nvidia.com/gpu` or MIG count, a MIG profile no model has,
  a request over the queue's maximum (`request > maximum capacity`, `ExceedsMaxQuota`), a
  resource no flavor of the queue covers (`NoMatchingFlavor`), a LocalQueue that does not exist,
  or every node ruled out by selector, affinity or taint;
- `other`: anything else, with the controller's own words.

Steps of `classify`: 1. the request itself; 2. Kueue conditions; 3. Volcano conditions;
4. the pod's scheduling status; 5. for a shortage, the capacity check (fragmentation or none).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpuledger.analytics.capacity.headroom import Headroom
from gpuledger.analytics.capacity.now import (
    MIG_PREFIX,
    PER_CARD,
    CardState,
    NodeState,
    node_shape,
    placeable_profiles,
    request_need,
)
from gpuledger.core.mig import catalog

QUOTA = "quota exhausted"
NO_CAPACITY = "no capacity of that shape"
FRAGMENTED = "stranded by fragmentation"
PREEMPTION = "priority / preemption"
NEVER = "never satisfiable"
OTHER = "other"
REASONS = (QUOTA, NO_CAPACITY, FRAGMENTED, PREEMPTION, NEVER, OTHER)

_UNUSED = re.compile(
    r"insufficient unused quota (?:in cohort )?for (\S+) in flavor ([^,\s]+), (\S+) more needed")
_MAX = re.compile(r"request > maximum capacity|insufficient quota for \S+ in flavor \S+ in ClusterQueue")
_NO_FLAVOR = re.compile(r"unavailable in ClusterQueue|doesn't match|does not match|no flavor")
_NO_QUEUE = re.compile(r"(LocalQueue|ClusterQueue) \S+ (doesn't exist|is inactive|not found)")
_SEGMENT = re.compile(r"(\d+) (.+)")
_INSUFFICIENT = re.compile(r"^Insufficient (\S+)$")


@dataclass(frozen=True, slots=True)
class Pending:
    """One stored `pending_workloads` row, parsed."""

    kind: str
    namespace: str
    name: str
    source: str
    queue: str | None = None
    requests: Mapping[str, float] = field(default_factory=dict)
    pods: int = 1
    node_selector: Mapping[str, str] = field(default_factory=dict)
    conditions: Sequence[Mapping[str, Any]] = ()
    event_reason: str | None = None
    event_message: str | None = None
    nominated_node: str | None = None
    claims: Sequence[Mapping[str, Any]] = ()
    created_at: datetime | None = None
    last_seen: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Pending:
        def js(key: str, default: Any) -> Any:
            value = row.get(key)
            return json.loads(value) if isinstance(value, str) and value else default
        return cls(
            kind=row["kind"], namespace=row["namespace"], name=row["name"], source=row["source"],
            queue=row.get("queue"), requests=js("requests", {}), pods=int(row.get("pods") or 1),
            node_selector=js("node_selector", {}), conditions=js("conditions", []),
            event_reason=row.get("event_reason"), event_message=row.get("event_message"),
            nominated_node=row.get("nominated_node"), claims=js("claims", []),
            created_at=row.get("created_at"), last_seen=row.get("last_seen"),
        )

    def condition(self, kind: str) -> Mapping[str, Any]:
        return next((c for c in self.conditions if c.get("type") == kind), {})


@dataclass(frozen=True)
class Context:
    """What the classes need besides the status: the cluster now."""

    cards: Sequence[CardState] = ()
    headroom: Sequence[Headroom] = ()
    cluster_queue_of: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, LocalQueue) → ClusterQueue."""
    node_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """node → labels (every node, GPU or not)."""
    advertised: frozenset[str] = frozenset()
    """Every resource name some node's allocatable lists."""
    free: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """node → shape → allocatable minus running requests (capacity now, step 1, in
    `capacity.now.node_shape`'s names: a time-sliced node's `nvidia.com/gpu` are replicas, not
    whole GPUs): `free_by_shape`."""


def free_by_shape(nodes: Sequence[NodeState]) -> dict[str, dict[str, float]]:
    """`Context.free` of nodes now: per node, what is free in each shape the node offers (the
    capacity-now shape rule, decision 0218), so a note counts what the scheduler would give the
    request's shape (issue 35 review: replicas and HAMi slots read as 73 GPUs where 5 were)."""
    out: dict[str, dict[str, float]] = {}
    for n in nodes:
        shapes = out.setdefault(n.node, {})
        for resource, free in n.free().items():
            shape = node_shape(resource, n.sharing_mode)
            if shape is not None:
                shapes[shape] = shapes.get(shape, 0.0) + free
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str
    namespace: str
    name: str
    reason: str
    detail: str
    shape: str | None
    cards: tuple[str, ...] = ()
    """For fragmentation: the cards (uuid) where a layout change would fit it."""


def request_shape(requests: Mapping[str, float]) -> tuple[str, float] | None:
    """The GPU resource a request is about (MIG first, then whole GPUs, then HAMi memory)."""
    for test in (lambda k: k.startswith(MIG_PREFIX), lambda k: k == "nvidia.com/gpu",
                 lambda k: k.startswith("nvidia.com/gpu")):
        for key in sorted(requests):
            if test(key):
                return key, float(requests[key])
    return None


def classify(p: Pending, ctx: Context) -> Verdict:
    """Steps 1-5 of the module docstring."""
    shape = request_shape(p.requests)
    shape_name = shape[0] if shape else ("dra" if p.claims else None)

    def verdict(reason: str, detail: str, cards: tuple[str, ...] = ()) -> Verdict:
        return Verdict(p.kind, p.namespace, p.name, reason, detail, shape_name, cards)

    never = _never_by_request(p.requests, ctx)
    if never:
        return verdict(NEVER, never)
    if p.source == "kueue":
        found = _kueue(p, ctx)
        if found:
            return verdict(*found)
    if p.kind == "PodGroup":
        found = _volcano(p)
        if found:
            return verdict(*found)
    if p.nominated_node:
        return verdict(PREEMPTION, f"preempting pods on {p.nominated_node}; waits for them to end")
    message = str(p.event_message or p.condition("PodScheduled").get("message")
                  or p.condition("Unschedulable").get("message") or "")
    if message or p.kind == "PodGroup":
        shortage = _scheduler(p, message, ctx)
        if shortage:
            return verdict(*shortage)
    raw = p.condition("QuotaReserved") or p.condition("PodScheduled") or p.condition("Unschedulable")
    return verdict(OTHER, str(raw.get("message") or raw.get("reason") or "no status written yet"))


def _never_by_request(requests: Mapping[str, float], ctx: Context) -> str | None:
    """Step 1: requests no node can ever satisfy, whatever the cluster does."""
    for key, value in sorted(requests.items()):
        if (key == "nvidia.com/gpu" or key.startswith(MIG_PREFIX)) and value != int(value):
            return f"{key}: {value:g} is fractional; the device plugin hands out whole devices"
        if key.startswith(MIG_PREFIX):
            profile = key[len(MIG_PREFIX):]
            if key not in ctx.advertised and not any(profile in m.profiles for m in catalog().values()):
                return f"MIG profile {profile} exists on no GPU model (and no node advertises {key})"
    return None


def _kueue(p: Pending, ctx: Context) -> tuple[str, str] | None:
    """Step 2: the Workload's conditions as Kueue writes them."""
    evicted, preempted = p.condition("Evicted"), p.condition("Preempted")
    if preempted.get("status") == "True" or (evicted.get("status") == "True"
                                             and evicted.get("reason") == "Preempted"):
        c = preempted if preempted.get("status") == "True" else evicted
        return PREEMPTION, f"preempted by Kueue ({c.get('reason')}): {c.get('message', '')}".strip()
    qr = p.condition("QuotaReserved")
    if qr.get("status") != "False":
        return None
    reason, message = str(qr.get("reason") or ""), str(qr.get("message") or "")
    if reason == "WaitingForPreemptedWorkloads":
        return PREEMPTION, message or "waiting for preempted workloads to end"
    if reason == "ExceedsMaxQuota" or _MAX.search(message):
        return NEVER, f"more than the queue can ever admit: {message}"
    if reason == "NoMatchingFlavor" or _NO_FLAVOR.search(message):
        return NEVER, f"no flavor of the queue offers it: {message}"
    if reason == "Inadmissible" or _NO_QUEUE.search(message):
        return NEVER, f"the queue cannot admit anything: {message}"
    unused = _UNUSED.search(message)
    if unused or reason == "WaitingForQuota":
        cq = ctx.cluster_queue_of.get((p.namespace, p.queue or ""), p.queue or "?")
        detail = f"ClusterQueue {cq}"
        if unused:
            resource, flavor, lack = unused.groups()
            detail += f": {resource} in flavor {flavor}, {lack} more needed"
            borrowers = sorted({b for h in ctx.headroom if h.cluster_queue == cq and h.flavor == flavor
                                and h.resource == resource for b in h.borrowers})
            if borrowers:
                detail += "; borrowed by " + ", ".join(borrowers)
        return QUOTA, detail
    return None


def _volcano(p: Pending) -> tuple[str, str] | None:
    """Step 3: the PodGroup's conditions as Volcano writes them."""
    c = p.condition("Unschedulable")
    reason, message = str(c.get("reason") or ""), str(c.get("message") or p.event_message or "")
    if reason == "NotInqueueable" or "queue resource quota insufficient" in message or "overused" in message:
        return QUOTA, f"Volcano queue {p.queue or '?'} cannot enqueue it: {message}"
    return None


def _segments(message: str) -> list[tuple[int, str]]:
    """kube-scheduler's `0/N nodes are available: a reason, b reason.` → [(a, reason), ...]
    (the part before `preemption:`; resource names keep their dots)."""
    head = message.split("preemption:", maxsplit=1)[0]
    if "nodes are available:" not in head:
        return []
    body = head.split("nodes are available:", 1)[1].strip().rstrip(".")
    return [(int(m.group(1)), m.group(2).strip()) for part in body.split(", ")
            if (m := _SEGMENT.fullmatch(part.strip()))]


def _scheduler(p: Pending, message: str, ctx: Context) -> tuple[str, str, tuple[str, ...]] | None:
    """Step 4: the scheduler's words; a shortage goes on to step 5."""
    unallocated = [c.get("name") for c in p.claims if not c.get("allocated")]
    if unallocated and "cannot allocate all claims" in message:
        return NO_CAPACITY, f"no free device for claim {', '.join(map(str, unallocated))}: {message}", ()
    segments = _segments(message)
    short = [m.group(1) for _, text in segments if (m := _INSUFFICIENT.search(text))]
    if segments and not short:
        matching = [n for n in ctx.node_labels if _selected(ctx, n, p.node_selector)]
        if p.node_selector and not matching:
            return NEVER, f"no node matches nodeSelector {dict(p.node_selector)}: {message}", ()
        return NEVER, f"every node is ruled out (selector, affinity or taint): {message}", ()
    if short or p.kind == "PodGroup":
        return _capacity(p, short[0] if short else None, message, ctx)
    return None


def _capacity(p: Pending, resource: str | None, message: str,
              ctx: Context) -> tuple[str, str, tuple[str, ...]]:
    """Step 5, with a note when the inventory now has room (the status is older than it): a
    node the pod may use has its whole request free in the request's shape (`request_need`:
    a whole-GPU request counts whole GPUs, never time-slice replicas or HAMi slots); the note
    says how much of that shape is free on those nodes. HAMi memory and cores are one card's
    (`PER_CARD`): a node's sum says nothing about a card, so they get no note."""
    shape = request_shape(p.requests)
    resource = resource or (shape[0] if shape else None)
    reason, detail, cards = _shortage(p, resource, message, ctx)
    need = request_need(p.requests)
    if need is None or need[1] <= 0 or need[0] in PER_CARD:
        return reason, detail, cards
    free = [amounts.get(need[0], 0.0) for node, amounts in ctx.free.items()
            if _selected(ctx, node, p.node_selector)]
    if any(f >= need[1] for f in free):
        total = sum(f for f in free if f > 0)
        detail += (f" [now {total:g} × {need[0]} free on matching nodes: the status predates "
                   "the inventory]")
    return reason, detail, cards


def _shortage(p: Pending, resource: str | None, message: str,
              ctx: Context) -> tuple[str, str, tuple[str, ...]]:
    """Step 5: a shortage of `resource` (the scheduler's word, else the request's) is
    fragmentation when a layout change would fit it."""
    eligible = [c for c in ctx.cards if _selected(ctx, c.node, p.node_selector)]
    if resource and resource.startswith(MIG_PREFIX):
        profile = resource[len(MIG_PREFIX):]
        beside = [c for c in eligible if profile in placeable_profiles(c.model, c.instances)]
        if beside:
            return FRAGMENTED, (f"{profile} fits beside the instances of {_names(beside)} "
                                "(a layout change adding it)"), tuple(c.uuid for c in beside)
        rebuilt = [c for c in eligible if profile in placeable_profiles(c.model, c.held)]
        if rebuilt:
            return FRAGMENTED, (f"{profile} fits on {_names(rebuilt)} once its idle instances are "
                                "rebuilt (layout change)"), tuple(c.uuid for c in rebuilt)
    elif resource == "nvidia.com/gpu":
        idle = [c for c in eligible if not any(c.held.values())]
        if idle:
            return FRAGMENTED, (f"MIG cards nobody holds could serve whole GPUs: {_names(idle)} "
                                "(layout change: MIG off or 7g)"), tuple(c.uuid for c in idle)
    what = resource or "GPU"
    return NO_CAPACITY, f"no free {what} on any node, nor after a layout change: {message}".rstrip(": "), ()


def _selected(ctx: Context, node: str, selector: Mapping[str, str]) -> bool:
    """Whether `node`'s labels match a pod's `nodeSelector` (every key, equal value)."""
    labels = ctx.node_labels.get(node) or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _names(cards: Sequence[CardState]) -> str:
    shown = [f"{c.node}/{c.uuid}" for c in cards[:3]]
    return ", ".join(shown) + (f" and {len(cards) - 3} more" if len(cards) > 3 else "")

