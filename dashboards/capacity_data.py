"""Capacity now and waiting workloads, read from a warehouse with the ClusterQueue quotas parsed
by the quota home: what the API, the Capacity page, the Pending panel, `gpuledger capacity`,
`gpuledger why`, `gpuledger publish` and the notebook facade call (`fleet_now`, `served_fleet`,
`served_capacity`).

Why here: the composition is analytics (`analytics.waiting.fleet`), but a ClusterQueue's quotas
and a node's allocatable are read by the quota home (`optimizer.quota.queues.kueue`,
`optimizer.quota.spec.parse_quantity`), which analytics may not import; this stage may, so it
parses them and passes them in. The documents (`capacity_document`, `why_document`, ...) are
`analytics.waiting.fleet`'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gpuledger.analytics.capacity.headroom import QueueQuota
from gpuledger.analytics.waiting.fleet import FleetNow
from gpuledger.core.config import Settings

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

DEFAULT_CLUSTER = "local"


def cluster_name(settings: Settings) -> str:
    """This cluster's name: `lake.cluster`, else `local`."""
    return settings.lake.cluster or DEFAULT_CLUSTER


def fleet_now(wh: Warehouse, settings: Settings, *, pending: bool = True) -> FleetNow:
    """`analytics.waiting.fleet.fleet_now` with the quotas parsed here (`pending=False`: the
    capacity alone, without reading the stored pending statuses)."""

    from gpuledger.analytics.waiting.fleet import fleet_now as compose

    cluster = cluster_name(settings)
    return compose(wh, cluster, queue_quotas(wh, cluster), _quantity, pending=pending)


def _quantity(value: Any) -> float:
    """An allocatable amount (Kubernetes quantity); one the quota home cannot read counts 0."""
    from gpuledger.core.errors import InputError
    from gpuledger.optimizer.quota.spec import parse_quantity

    try:
        return parse_quantity(value, "node allocatable")
    except InputError:
        return 0.0


def queue_quotas(wh: Warehouse, cluster: str) -> list[QueueQuota]:
    """The quota home parses each stored ClusterQueue; Kueue's usage joins by flavor/resource."""
    from gpuledger.core.errors import InputError
    from gpuledger.optimizer.quota.queues.kueue import queue_from_object
    from gpuledger.warehouse.queries import waiting as wq
    from gpuledger.warehouse.queries.optimizer import queue_objects

    used = {(cq, f, r): float(t) for cq, f, r, t, _b in wq.queue_usage(wh).iter_rows()}
    out = []
    for name, spec, version in queue_objects(wh, "ClusterQueue").iter_rows():
        try:
            queue = queue_from_object({"metadata": {"name": name, "resourceVersion": version},
                                       "spec": json.loads(spec) if spec else {}}, "stored ClusterQueue")
        except InputError:
            continue  # a spec the quota home refuses is shown nowhere rather than half-read
        for (flavor, resource), q in queue.quotas.items():
            out.append(QueueQuota(cluster, name, queue.cohort, flavor, resource, q.nominal,
                                  q.borrowing_limit, q.lending_limit,
                                  used.get((name, flavor, resource), 0.0)))
    return out


def served_fleet(data: Any, settings: Settings) -> FleetNow:
    """`fleet_now` on the dashboard's serving snapshot, once per snapshot (`ReadModel.memo`)."""
    def compute() -> FleetNow:
        with data.store.reader(data.serving()) as wh:
            return fleet_now(wh, settings)

    result: FleetNow = data.memo("capacity_fleet_now", compute)
    return result


def served_capacity(data: Any, settings: Settings) -> dict[str, Any]:
    """`capacity_document` of the served snapshot, once per snapshot: what `/api/v1/capacity`
    serves and the Capacity page draws (each cuts it per reader by `exports.scope_document`).
    Shared: nobody changes what it hands out."""
    from gpuledger.analytics.waiting.fleet import capacity_document

    result: dict[str, Any] = data.memo("capacity_document",
                                       lambda: capacity_document(served_fleet(data, settings)))
    return result
