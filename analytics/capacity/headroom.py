"""Each queue's headroom per flavor and resource: nominal, used, free, borrowable, lendable.

Why: "there is a free card" is not "my job can start" under Kueue; the ClusterQueue must also
have quota. Kueue's cohort accounting (kubernetes-sigs/kueue `pkg/cache` resource nodes, and
site/content/en/docs/concepts/cluster_queue.md "Borrowing" / "LendingLimit"), in the terms a
user reads:

1. `free` = nominal - used (never below 0): admits without borrowing.
2. Each other queue Y of the cohort lends its unused nominal except its guarantee
   (`nominal - lendingLimit` when a lending limit is set): `max(0, nominal_Y - max(used_Y, guarantee_Y))`.
3. The cohort's pool for X = what the others lend (step 2) minus what the others already borrow
   (`used_Z - nominal_Z` over nominal); X's `borrowable` = that pool, capped by X's
   `borrowingLimit` less what X borrows already. A queue without a cohort borrows nothing.
4. `lendable` = the lending limit, else the whole nominal quota; `borrowers` = the cohort's
   queues using more than their nominal quota of this flavor and resource (who holds what a
   waiting job's queue lent).

The quota numbers come from the quota home (`optimizer.quota.queues.kueue.queue_from_object`,
parsed by the roof) and usage from the ClusterQueue's `status.flavorsUsage` (Kueue's own count).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """One ClusterQueue's quota of one (flavor, resource) and Kueue's usage of it."""

    cluster: str
    cluster_queue: str
    cohort: str | None
    flavor: str
    resource: str
    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None
    used: float = 0.0


@dataclass(frozen=True, slots=True)
class Headroom:
    cluster: str
    cluster_queue: str
    cohort: str | None
    flavor: str
    resource: str
    nominal: float
    used: float
    free: float
    borrowable: float
    lendable: float
    borrowers: tuple[str, ...]

    @property
    def admits(self) -> float:
        """What one more workload could take now: free nominal plus what it may borrow."""
        return self.free + self.borrowable


def _lends(q: QueueQuota) -> float:
    guarantee = q.nominal - q.lending_limit if q.lending_limit is not None else 0.0
    return max(0.0, q.nominal - max(q.used, guarantee))


def headroom(quotas: Iterable[QueueQuota]) -> list[Headroom]:
    """Steps 1-4 for every row, sorted by cluster, queue, flavor and resource."""
    rows = list(quotas)
    groups: dict[tuple[str, str, str, str], list[QueueQuota]] = defaultdict(list)
    for q in rows:
        if q.cohort:
            groups[(q.cluster, q.cohort, q.flavor, q.resource)].append(q)
    out = []
    for q in rows:
        peers = [p for p in groups.get((q.cluster, q.cohort or "", q.flavor, q.resource), [])
                 if p.cluster_queue != q.cluster_queue] if q.cohort else []
        pool = sum(_lends(p) for p in peers) - sum(max(0.0, p.used - p.nominal) for p in peers)
        borrowable = max(0.0, pool)
        if q.borrowing_limit is not None:
            borrowable = min(borrowable, max(0.0, q.borrowing_limit - max(0.0, q.used - q.nominal)))
        out.append(Headroom(
            cluster=q.cluster, cluster_queue=q.cluster_queue, cohort=q.cohort, flavor=q.flavor,
            resource=q.resource, nominal=q.nominal, used=q.used, free=max(0.0, q.nominal - q.used),
            borrowable=borrowable,
            lendable=q.lending_limit if q.lending_limit is not None else q.nominal,
            borrowers=tuple(sorted(p.cluster_queue for p in peers if p.used > p.nominal)),
        ))
    return sorted(out, key=lambda h: (h.cluster, h.cluster_queue, h.flavor, h.resource))
