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
3. another pool or cluster: the same shape ready now elsewhere (shapes named by
   `analytics.capacity.now.request_need`, the capacity rows' own names; a HAMi request needs its
   memory, and the cores it asks, left on ONE card) → `submit to cluster <name>` (other
   clusters' rows come from the org lake), or for a workload pinned to a pool by
   `nodeSelector gpuledger.io/pool`, the pool with room (an unpinned one is already offered every
   pool by the scheduler). `where` names the nodes or cards: `fits now on n-7 (cluster west, pool train)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuledger.analytics.capacity.headroom import Headroom
from gpuledger.analytics.capacity.now import (
    HAMI_CORES,
    HAMI_CORES_RESOURCE,
    HAMI_MEM,
    MIG_PREFIX,
    PER_CARD,
    WHOLE,
    ShapeFree,
    request_need,
)
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
    """Steps 1-3 of the module docstring; `here` is the cluster the workload waits in,
    `capacity` may hold other clusters' rows (the org lake's)."""
    if v.reason in (NEVER, PREEMPTION):
        return None
    shape, need = request_shape(p.requests), request_need(p.requests)
    if shape is None or need is None:
        return None
    resource, count = shape
    if v.reason == QUOTA:
        mine = cluster_queue_of.get((p.namespace, p.queue or ""))
        for (ns, lq), cq in sorted(cluster_queue_of.items()):
            if ns == p.namespace and cq != mine and _admits(headroom, cq, resource, count):
                return Suggestion("queue", f"kueue.x-k8s.io/queue-name: {p.queue} → {lq}",
                                  f"ClusterQueue {cq}")
        return None
    wanted, amount = need
    if wanted == WHOLE or wanted.startswith("mig "):
        bigger = _bigger(wanted, [r for r in capacity if r.ready >= amount])
        if bigger is not None:
            return Suggestion("profile", f"{resource}: {amount:g} → {bigger.shape_resource}: {amount:g}",
                              _where(bigger.row, bigger.row.nodes[:3]))
    pinned = p.node_selector.get(POOL_LABEL)
    for r in capacity:
        where = _fits(r, wanted, amount, p.requests, capacity)
        if not where:
            continue
        if r.cluster != here:
            return Suggestion("cluster", f"submit to cluster {r.cluster}", _where(r, where))
        if r.pool and pinned is not None and r.pool != pinned:
            return Suggestion("pool", f"nodeSelector {POOL_LABEL}: {pinned} → {r.pool}", _where(r, where))
    return None


def _where(row: ShapeFree, places: Sequence[str]) -> str:
    """`fits now on a100-mig-002 (cluster west, pool train)`: the nodes or cards, named."""
    shown = ", ".join(places[:3]) + (" …" if len(places) > 3 else "")
    return f"fits now on {shown} (cluster {row.cluster}, pool {row.pool or '-'})"


def _fits(row: ShapeFree, wanted: str, amount: float, requests: Mapping[str, float],
          capacity: Sequence[ShapeFree]) -> tuple[str, ...]:
    """Where `row` holds the request now: its nodes, or for a per-card shape the cards with
    `amount` left (and, for a HAMi request, the cores it asks on the same card); () if none."""
    if row.shape != wanted or row.ready < amount:
        return ()
    if wanted not in PER_CARD:
        return row.nodes
    cards = {card for card, free in row.per_card if free >= amount}
    cores = requests.get(HAMI_CORES_RESOURCE)
    if wanted == HAMI_MEM and cores:
        left = next((r.per_card for r in capacity if r.shape == HAMI_CORES and
                     (r.cluster, r.pool, r.model) == (row.cluster, row.pool, row.model)), ())
        cards &= {card for card, free in left if free >= cores}
    return tuple(card for card, _ in row.per_card if card in cards)


@dataclass(frozen=True, slots=True)
class _Bigger:
    row: ShapeFree
    shape_resource: str


def _bigger(wanted: str, ready: Sequence[ShapeFree]) -> _Bigger | None:
    """Step 2: the smallest ready MIG profile that holds the request (compute, then memory)."""
    best: tuple[tuple[int, int], _Bigger] | None = None
    want = wanted[4:] if wanted.startswith("mig ") else None
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
