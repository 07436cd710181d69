"""The optimize stage's part of the queue-system seam: a `QuotaReader` per queue system.

Why: the quota planner (forecast, CP-SAT model, replay) works on a neutral model, `QueueSpec`
(cohort, weight, quota per flavor and resource). Everything that knows a queue system's object
shape sits behind `QuotaReader`: turning its objects into `QueueSpec`s, finding its queues'
teams and mean pod size in the warehouse, hashing the state a plan was computed from, and
writing the planned numbers back into a whole new object body. Kueue
(`optimizer.quota.queues.kueue`) is the first implementation; another system is one more module here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gpuledger.core.queues import DEFAULT_QUEUE_SYSTEM, queue_registry
from gpuledger.core.registry import Registry

if TYPE_CHECKING:
    from gpuledger.optimizer.quota.spec import QueueSpec, Quota
    from gpuledger.warehouse import Warehouse


class QuotaReader(Protocol):
    """How the quota optimizer reads (and re-writes, as plan data) one queue system's quotas."""

    name: str
    object_kind: str
    """The kind of the quota-holding object (stored in table `queues`, named in plans)."""
    file_key: str
    """The key of the list of such objects in a `--queues` file."""

    def queue_from_object(self, obj: Mapping[str, Any], where: str,
                          dra: Collection[str] = ()) -> QueueSpec:
        """One object (or a mapping with `name` and `spec`) → `QueueSpec`; `InputError` if bad.
        `dra`: the DRA quota resource names planned besides GPUs (systems without any ignore it)."""
        ...

    def queue_teams(self, wh: Warehouse) -> dict[str, str]:
        """Queue → its one owning team, from the warehouse's inventory."""
        ...

    def request_sizes(self, wh: Warehouse) -> RequestSizes:
        """What the pods submitted to each queue requested of the planned resources."""
        ...

    def observed_state(self, queue: QueueSpec) -> dict[str, Any]:
        """The part of the object a plan depends on (its hash is the plan's staleness check)."""
        ...

    def rewrite(
        self, queue: QueueSpec, quotas: Mapping[tuple[str, str], Quota],
    ) -> tuple[dict[str, Any], ...]:
        """The object's quota body with the planned numbers of (flavor, resource) set."""
        ...


@dataclass(frozen=True)
class RequestSizes:
    mean: dict[str, float]
    """Queue → mean planned-resource request per pod (what a pending workload is counted as)."""
    smallest: dict[str, dict[str, float]]
    """Queue → resource → the smallest request per pod: the queue's admission unit
    (`QueueSpec.units`, decision 0249)."""


def request_sizes(rows: Iterable[tuple[str | None, str | None, int]], planned: Callable[[str], bool]
                  ) -> RequestSizes:
    """`RequestSizes` from (queue, requests as JSON text, pods with those requests) rows; only
    numeric requests of `planned` resources count (HAMi's `gpumem`/`gpucores` are not counts)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    smallest: dict[str, dict[str, float]] = defaultdict(dict)
    for queue, text, pods in rows:
        amounts = {k: float(v) for k, v in json.loads(text or "{}").items()
                   if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 and planned(k)}
        if not queue or not amounts:
            continue
        totals[queue][0] += sum(amounts.values()) * pods
        totals[queue][1] += pods
        for resource, amount in amounts.items():
            smallest[queue][resource] = min(amount, smallest[queue].get(resource, amount))
    return RequestSizes({q: s / n for q, (s, n) in totals.items()}, dict(smallest))


READERS: Registry[QuotaReader] = queue_registry("optimize", __name__)


def quota_reader(name: str = DEFAULT_QUEUE_SYSTEM) -> QuotaReader:
    """The optimize stage's part of queue system `name`."""
    return READERS.get(name)
