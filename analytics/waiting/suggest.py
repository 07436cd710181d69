"""A suggestion that fits now: another profile, queue, pool or cluster with room, as the one
line a user changes in their manifest.

Why one line: a person who reads "quota exhausted" needs to know what to change, and a change
they can paste is the one they make. Tried in this order (the first with room wins; none: no
suggestion, never a guess):

1. another queue: for `quota exhausted`, a LocalQueue of the same namespace that submits to
   another ClusterQueue, one that admits the request now (free nominal plus what it may
   borrow, `analytics.capacity.headroom`) → `kueue.x-k8s.io/queue-name: old → new`;
2. another profile: for a MIG request, a larger profile (at least the compute and memory slices
   asked) that is ready now on the same model; for whole GPUs, the full-card profile
   (`7g.*`) ready now → `nvidia.com/mig-3g.40gb: 1 → nvidia.com/mig-4g.40gb: 1`;
3. another pool or cluster: the same shape ready now elsewhere → `submit to cluster <name>`, or
   for a workload pinned to a pool by `nodeSelector gpuledger.io/pool`, the pool with room (an
   unpinned one is already offered every pool by the scheduler).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuledger.analytics.capacity.headroom import Headroom
from gpuledger.analytics.capacity.now import MIG_PREFIX, ShapeFree
from gpuledger.analytics.waiting.why import NEVER, PREEMPTION, QUOTA, Pending, Verdict, request_shape
from gpuledger.core.mig import catalog

POOL_LABEL = "gpuledger.io/pool"


@dataclass(frozen=True, slots=True)
class Suggestion:
    kind: str
    """queue | profile | pool | cluster"""
    change: str
    """The one manifest line to change, `old → new`."""
    where: str


def _admits(rows: Sequence[Headroom], cq: str, resource: str, amount: float) -> bool:
    return any(h.cluster_queue == cq and h.resource == resource and h.admits >= amount for h in rows)


def suggest(p: Pending, v: Verdict, capacity: Sequence[ShapeFree], headroom: Sequence[Headroom],
            cluster_queue_of: Mapping[tuple[str, str], str], *, here: str) -> Suggestion | None:
    """Steps 1-3 of the module docstring; `here` is the cluster the workload waits in."""
    if v.reason in (NEVER, PREEMPTION):
        return None
    shape = request_shape(p.requests)
    if shape is None:
        return None
    resource, amount = shape
    if v.reason == QUOTA:
        mine = cluster_queue_of.get((p.namespace, p.queue or ""))
        for (ns, lq), cq in sorted(cluster_queue_of.items()):
            if ns == p.namespace and cq != mine and _admits(headroom, cq, resource, amount):
                return Suggestion("queue", f"kueue.x-k8s.io/queue-name: {p.queue} → {lq}",
                                  f"ClusterQueue {cq}")
        return None
    ready = [r for r in capacity if r.ready >= amount]
    bigger = _bigger(resource, ready)
    if bigger is not None:
        return Suggestion("profile", f"{resource}: {amount:g} → {bigger.shape_resource}: {amount:g}",
                          f"{bigger.row.cluster}/{bigger.row.pool or '-'}: {', '.join(bigger.row.nodes[:3])}")
    wanted = _shape_name(resource)
    for r in ready:
        if r.shape == wanted and r.cluster != here:
            return Suggestion("cluster", f"submit to cluster {r.cluster}", f"{r.cluster}/{r.pool or '-'}")
        pinned = p.node_selector.get(POOL_LABEL)
        if r.shape == wanted and r.pool and pinned is not None and r.pool != pinned:
            return Suggestion("pool", f"nodeSelector {POOL_LABEL}: {pinned} → {r.pool}",
                              f"{r.cluster}/{r.pool}")
    return None


@dataclass(frozen=True, slots=True)
class _Bigger:
    row: ShapeFree
    shape_resource: str


def _shape_name(resource: str) -> str:
    if resource.startswith(MIG_PREFIX):
        return "mig " + resource[len(MIG_PREFIX):]
    return "whole GPU" if resource == "nvidia.com/gpu" else resource


def _bigger(resource: str, ready: Sequence[ShapeFree]) -> _Bigger | None:
    """Step 2: the smallest ready MIG profile that holds the request (compute, then memory)."""
    best: tuple[tuple[int, int], _Bigger] | None = None
    want = resource[len(MIG_PREFIX):] if resource.startswith(MIG_PREFIX) else None
    for row in ready:
        if not row.shape.startswith("mig ") or row.model not in catalog():
            continue
        profiles = catalog()[row.model].profiles
        name = row.shape[4:]
        got = profiles.get(name)
        if got is None:
            continue
        if want is not None:
            asked = profiles.get(want)
            if asked is None or name == want or got.compute < asked.compute or got.memory < asked.memory:
                continue
        elif got.compute < 7:
            continue  # a whole GPU is only ever the full-card profile
        key = (got.compute, got.memory)
        if best is None or key < best[0]:
            best = (key, _Bigger(row, MIG_PREFIX + name))
    return best[1] if best else None
