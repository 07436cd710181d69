"""The read model of capacity now and of waiting workloads, shared by the API, the Pending panel,
`gpuledger capacity`, `gpuledger why`, the lake's capacity partition and the notebook facade
(one composition, one answer).

Why here: it joins `analytics.capacity` with `analytics.waiting` over the warehouse's named read
queries. The ClusterQueue quotas are passed in (`quotas`): they are parsed by the quota home
(`optimizer.quota.queues.kueue.queue_from_object`), which analytics may not import, so the
stage above (`dashboards.capacity_data.fleet_now`) parses them and calls `fleet_now` here.

Steps of `fleet_now`:
1. Nodes of the newest inventory with their allocatable, and the GPU requests of the pods
   running on them (`warehouse.queries.waiting`); free DRA devices and HAMi memory/cores left
   per card.
2. MIG cards: the instances alive at the newest layout observation (`mig_instances`) and the
   instances a pod held at the newest sample (`gpu_samples`).
3. The stored pending statuses and the namespaces' teams, only when asked (`pending=True`):
   `gpuledger capacity` does not read them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.analytics.capacity.headroom import Headroom, QueueQuota, headroom
from gpuledger.analytics.capacity.now import (
    CardState,
    DeviceFree,
    NodeState,
    ShapeFree,
    capacity_now,
    hami_left,
)
from gpuledger.analytics.teams.queues import target_cluster_queue
from gpuledger.analytics.waiting.why import Context, Pending, Verdict, classify, free_by_shape

if TYPE_CHECKING:
    from gpuledger.warehouse.protocols import ReadableWarehouse


@dataclass(frozen=True)
class FleetNow:
    """Everything capacity and `why` read, at one snapshot. What is derived from it (capacity,
    headroom, the classes) is computed once and kept: a snapshot never changes, and
    `served_fleet` shares one across requests (so nobody changes what it hands out)."""

    cluster: str
    at: datetime | None
    nodes: Sequence[NodeState]
    cards: Sequence[CardState]
    quotas: Sequence[QueueQuota]
    node_labels: Mapping[str, Mapping[str, str]]
    cluster_queue_of: Mapping[tuple[str, str], str]
    pending: Sequence[Pending] = ()
    teams: Mapping[str, str] = field(default_factory=dict)
    devices: Sequence[DeviceFree] = ()
    elsewhere: Sequence[ShapeFree] = ()
    """Capacity now of the other clusters (the org lake's capacity partitions): where a
    suggestion may send a workload that does not fit here."""

    @cached_property
    def capacity(self) -> list[ShapeFree]:
        return capacity_now(self.nodes, self.cards, self.devices)

    @cached_property
    def headroom(self) -> list[Headroom]:
        return headroom(self.quotas)

    @cached_property
    def _context(self) -> Context:
        advertised = frozenset(r for n in self.nodes for r, v in n.allocatable.items() if float(v) > 0)
        return Context(cards=self.cards, headroom=self.headroom, cluster_queue_of=self.cluster_queue_of,
                       node_labels=self.node_labels, advertised=advertised,
                       free=free_by_shape(self.nodes))

    @cached_property
    def _waiting(self) -> tuple[Pending, ...]:
        newest = max((p.last_seen for p in self.pending if p.last_seen), default=None)
        return tuple(p for p in self.pending if p.last_seen == newest)

    @cached_property
    def _verdicts(self) -> dict[tuple[str, str, str], Verdict]:
        ctx = self._context
        return {(p.kind, p.namespace, p.name): classify(p, ctx) for p in self._waiting}

    def context(self) -> Context:
        return self._context

    def verdicts(self) -> list[Verdict]:
        """Every workload waiting at the snapshot, classified (`analytics.waiting.why`)."""
        return list(self._verdicts.values())

    def why_rows(self, now: datetime, basis: str = "compute") -> list[dict[str, Any]]:
        """One row per waiting workload: its class, detail, wait, usual wait, suggestion."""
        from gpuledger.analytics.waiting.cost import shape_key, size_in_gpus, typical_wait, wait_hours
        from gpuledger.analytics.waiting.suggest import suggest

        ids = set(self._verdicts)
        everywhere = [*self.capacity, *(r for r in self.elsewhere if r.cluster != self.cluster)]
        typical: dict[str, float | None] = {}  # per shape: one pass over the history, not one a row
        rows = []
        for p in self._waiting:
            v = self._verdicts[(p.kind, p.namespace, p.name)]
            tip = suggest(p, v, everywhere, self.headroom, self.cluster_queue_of, here=self.cluster)
            shape = shape_key(p)
            if shape not in typical:
                typical[shape] = typical_wait(self.pending, ids, shape, now)
            rows.append({
                "kind": p.kind, "namespace": p.namespace, "name": p.name,
                "team": self.teams.get(p.namespace) or SpecialLine.UNATTRIBUTED.value, "queue": p.queue,
                "shape": shape, "gpus": round(size_in_gpus(p, basis), 4), "reason": v.reason,
                "detail": v.detail, "waited_hours": _round(wait_hours(p, now)),
                "usual_wait_hours": _round(typical[shape]),
                "suggestion": tip.change if tip else None, "suggestion_where": tip.where if tip else None,
            })
        return rows

    def cost_rows(self, now: datetime, basis: str = "compute",
                  rows: Sequence[Mapping[str, Any]] | None = None) -> tuple[list[Any], list[Any]]:
        """(per team and queue, per shape) of `analytics.waiting.cost`; `rows`: this snapshot's
        `why_rows(now, basis)` when the caller has them already (all of them, unfiltered)."""
        from gpuledger.analytics.waiting.cost import by_queue, by_shape

        rows = self.why_rows(now, basis) if rows is None else rows
        suggested = {(r["kind"], r["namespace"], r["name"]) for r in rows if r["suggestion"]}
        waiting = list(self._waiting)
        return (by_queue(waiting, self._verdicts, suggested, self.teams, now, basis=basis),
                by_shape(self.pending, now))

    def waiting(self) -> list[Pending]:
        """The stored pending rows still seen at the newest snapshot."""
        return list(self._waiting)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _json(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text) if isinstance(text, str) else text
    return value if isinstance(value, dict) else {}


def fleet_now(wh: ReadableWarehouse, cluster: str, quotas: Sequence[QueueQuota],
              quantity: Callable[[Any], float], *, pending: bool = True) -> FleetNow:
    """Steps 1-3 of the module docstring; `quotas`: the ClusterQueues' (parsed by the quota
    home), `quantity`: its reader of an allocatable amount (Kubernetes quantity)."""
    from gpuledger.warehouse.queries import mig as mq
    from gpuledger.warehouse.queries import waiting as wq

    at = wq.snapshot_time(wh)
    requested: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    if at is not None:
        for node, text in wq.running_requests(wh, at).iter_rows():
            for resource, amount in _json(text).items():
                requested[node][resource] += float(amount)
    nodes, labels = [], {}
    for row in wq.nodes_now(wh).iter_rows(named=True):
        labels[row["node"]] = {k: str(v) for k, v in _json(row["labels"]).items()}
        alloc = {k: quantity(v) for k, v in _json(row["allocatable"]).items()}
        nodes.append(NodeState(cluster, row["node"], row["pool"], row["model"], row["sharing_mode"] or "",
                               alloc, dict(requested.get(row["node"], {}))))
    return FleetNow(cluster=cluster, at=at, nodes=nodes, cards=_cards(wh, cluster, mq),
                    quotas=list(quotas), node_labels=labels, cluster_queue_of=_local_queues(wh),
                    pending=[Pending.from_row(r) for r in wq.pending_rows(wh).iter_rows(named=True)]
                    if pending else [],
                    teams=dict(wq.namespace_teams(wh).iter_rows()) if pending else {},
                    devices=_devices(wh, cluster, {n.node: n.pool for n in nodes}))


def _devices(wh: ReadableWarehouse, cluster: str, pools: Mapping[str, str | None]) -> list[DeviceFree]:
    """Step 1 continued: free DRA devices and HAMi memory/cores left (`analytics.capacity.now`)."""
    from gpuledger.warehouse.queries import waiting as wq

    out = [DeviceFree(cluster, node, pools.get(node), model, shape, float(free))
           for node, model, shape, free in wq.dra_free(wh).iter_rows()]
    for node, uuid, model, memory, used_mib, used_cores in wq.hami_cards(wh).iter_rows():
        out += hami_left(cluster, node, pools.get(node), model, memory_mib=memory, used_mib=used_mib,
                         used_cores=used_cores, card=uuid)
    return out


def _cards(wh: ReadableWarehouse, cluster: str, mq: Any) -> list[CardState]:
    """Step 2."""
    last = mq.last_instance_end(wh)
    if last is None:
        return []
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for uuid, profile, n in mq.instance_counts_since(wh, last).iter_rows():
        counts[uuid][profile] = int(n)
    held: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in mq.holders_at_last_sample(wh).iter_rows(named=True):
        if row["mig_profile"]:
            held[row["uuid"]][row["mig_profile"]] += 1
    out = []
    for row in mq.gpus_with_nodes(wh).iter_rows(named=True):
        if row["uuid"] in counts:
            out.append(CardState(cluster, row["node"], row["pool"], row["model"], row["uuid"],
                                 counts[row["uuid"]], dict(held.get(row["uuid"], {}))))
    return out


def _local_queues(wh: ReadableWarehouse) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue) → the ClusterQueue it submits to (`analytics.teams.queues`)."""
    from gpuledger.warehouse.queries import waiting as wq

    out = {}
    for namespace, name, spec in wq.local_queues(wh).iter_rows():
        target = target_cluster_queue(spec)
        if target:
            out[(namespace or "", name)] = target
    return out


CAPACITY_SCHEMA = "gpuledger.capacity/v1"
WHY_SCHEMA = "gpuledger.why/v1"


def _stamp(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


def _whole(amount: float | None) -> float | int | None:
    """Devices, replicas, MiB and quota units are whole numbers: said as `3`, not `3.000`."""
    return int(amount) if amount is not None and float(amount).is_integer() else amount


def capacity_document(fleet: FleetNow) -> dict[str, Any]:
    """`gpuledger capacity --format json` and `/api/v1/capacity`: one document, both places."""
    return capacity_document_of(fleet.cluster, _stamp(fleet.at), fleet.capacity, fleet.headroom)


def capacity_document_of(cluster: str, at: str | None, capacity: Sequence[ShapeFree],
                         queues: Sequence[Headroom], **more: Any) -> dict[str, Any]:
    """The capacity document of rows already computed: one cluster's now, or the org lake's
    (`cluster` `org`, rows of every cluster; `more`: e.g. each cluster's snapshot time)."""
    return {
        "schema": CAPACITY_SCHEMA, "cluster": cluster, "at": at, **more,
        "capacity": [{"cluster": r.cluster, "pool": r.pool, "model": r.model, "shape": r.shape,
                      "ready": _whole(r.ready), "placeable": r.placeable, "nodes": list(r.nodes),
                      "per_card": [{"card": c, "free": _whole(f)} for c, f in r.per_card]}
                     for r in capacity],
        "queues": [{"cluster": h.cluster, "cluster_queue": h.cluster_queue, "cohort": h.cohort,
                    "flavor": h.flavor, "resource": h.resource, "nominal": _whole(h.nominal),
                    "used": _whole(h.used), "free": _whole(h.free), "borrowable": _whole(h.borrowable),
                    "lendable": _whole(h.lendable), "borrowers": list(h.borrowers)}
                   for h in queues],
    }


def matches(row: Mapping[str, Any], target: str) -> bool:
    """`name`, `namespace/name` or `Kind/name` names a waiting row."""
    name, ns, kind = row["name"], row["namespace"], row["kind"]
    return target in (name, f"{ns}/{name}", f"{kind}/{name}", f"{kind}/{ns}/{name}")


def why_document(fleet: FleetNow, now: datetime, target: str | None = None,
                 basis: str = "compute") -> dict[str, Any]:
    """`gpuledger why [POD|WORKLOAD]` and `/api/v1/why`: the waiting workloads, classified, and
    the cost of waiting; a `target` that waits nowhere is one line (`NotFoundError`)."""
    from gpuledger.core.errors import InputError

    every = rows = fleet.why_rows(now, basis)
    if target:
        picked = [r for r in rows if matches(r, target)]
        if not picked:
            seen = [p for p in fleet.pending if matches(
                {"name": p.name, "namespace": p.namespace, "kind": p.kind}, target)]
            if seen and seen[-1].last_seen is not None and seen[-1].created_at is not None:
                hours = (seen[-1].last_seen - seen[-1].created_at).total_seconds() / 3600
                raise InputError(f"{target} is not waiting now (it waited {hours:.1f} h, last seen "
                                    f"pending {_stamp(seen[-1].last_seen)})")
            raise InputError(f"no waiting workload named {target!r} ({len(rows)} waiting; "
                                "`gpuledger why` lists them)")
        rows = picked
    queues, shapes = fleet.cost_rows(now, basis, every)
    return {
        "schema": WHY_SCHEMA, "cluster": fleet.cluster, "at": _stamp(fleet.at), "waiting": rows,
        "by_queue": [{"team": q.team, "queue": q.queue, "waiting": q.waiting,
                      "gpu_hours_waiting": round(q.gpu_hours_waiting, 3),
                      "servable_elsewhere": q.servable_elsewhere,
                      "servable_share": round(q.servable_share, 3)} for q in queues],
        "by_shape": [{"shape": s.shape, "waits": s.waits, "p50_hours": round(s.p50_hours, 2),
                      "p95_hours": round(s.p95_hours, 2)} for s in shapes],
    }


def top_reasons(document: Mapping[str, Any], top: int = 5) -> list[tuple[str, int]]:
    """The most frequent classes among the waiting rows of a `why_document`."""
    from collections import Counter

    return Counter(r["reason"] for r in document["waiting"]).most_common(top)
