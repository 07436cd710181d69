"""A replay window rebuilt from the warehouse: queues and flavors from table `queues`, nodes from
`nodes`, workloads from `pods` and `queue_samples`.

The warehouse keeps no workload's arrival: `pods` has each pod's start (status.startTime: after
Kueue admitted it) and end, and `queue_samples` each ClusterQueue's count of pending workloads per
sample. Arrivals follow from the two under FIFO within a queue (Kueue's order at equal priority):
arrived by t = started by t + pending at t, so the k-th pod to start in the window arrived at the
first sample t where that sum reaches k (never after its start; one pending at the window's start
arrived then, as far as the window knows). Steps of `window_from_warehouse(wh, start, end)`:
1. ClusterQueues through the product's Kueue quota reader: cohort, preemption policies
   (`reclaimWithinCohort`, `withinClusterQueue`) and, per (flavor, resource) in resourceGroups
   order, nominal/borrowing/lending quotas of whole GPUs (`nvidia.com/gpu`) and MIG instances
   (`nvidia.com/mig-*`); `nominal_gpus` is the sum of the whole-GPU ones.
2. Flavors (tools/twin/flavors.py): each stored ResourceFlavor a quota names, with its
   `spec.nodeLabels`; its nodes are the inventory's (`nodes`, as last collected) whose labels hold
   every nodeLabel, each with its allocatable GPU and MIG resources as the device plugin reported
   them (time-sliced replicas included). A flavor with no stored ResourceFlavor, or no node
   matching, gets one node holding the sum of the queues' nominal quotas, labelled
   `FLAVOR_LABEL=<flavor>` (the twin then judges admission, not packing).
3. Pods that ran in [start, end) through a LocalQueue (its ClusterQueue from its spec), asking a
   whole number of ONE quota-covered resource (whole GPUs or one MIG profile; others counted in
   `skipped`); each pod is one workload (a Job's pods are not regrouped), PINNED to the flavor of
   the node it ran on (a nodeSelector on that flavor's nodeLabels: the placement the record shows),
   unpinned when its node matches no flavor. A pod on a node of a flavor whose Kueue usage is
   zero in every queue sample of the window was not admitted by Kueue (another scheduler's pool:
   the demo's Volcano-run h100-train pods carry a Kueue queue label too) and is skipped. Its run
   is the part inside the window: a pod running
   when the window opens arrives at minute 0 (first in its queue's FIFO: it started first) with
   what remained of its run; one running past the end stops there.
4. Arrivals per ClusterQueue as above, in minutes from `start`.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuledger.analytics.teams.queues import target_cluster_queue
from gpuledger.optimizer.quota.queues import quota_reader
from gpuledger.optimizer.quota.spec import GPU, is_gpu_resource
from gpuledger.warehouse.queries.optimizer import queue_objects, queue_samples_after, queued_pods_overlapping
from gpuledger.warehouse.queries.waiting import nodes_now
from tools.twin.flavors import Flavor, FlavorQuota
from tools.twin.replay import QueueSpec, Window, WorkloadSpec
from tools.twin_build.builder import TwinBuildError

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse


@dataclass(frozen=True)
class FromWarehouse:
    window: Window
    skipped: int
    """Pods of the window left out: not a whole number of one quota-covered resource, or a
    LocalQueue naming no known ClusterQueue (pods whose queue label names no stored LocalQueue are
    not read at all)."""


FLAVOR_LABEL = "twin.gpuledger.io/flavor"


def _queues(wh: Warehouse) -> tuple[QueueSpec, ...]:
    reader = quota_reader("kueue")
    out = []
    for r in queue_objects(wh, reader.object_kind).iter_rows(named=True):
        obj = {"metadata": {"name": r["name"]}, "spec": json.loads(r["spec"] or "{}")}
        q = reader.queue_from_object(obj, f"{wh.path}: queues")
        quotas = tuple(FlavorQuota.of(flavor, resource, x)
                       for (flavor, resource), x in q.quotas.items() if is_gpu_resource(resource))
        if not quotas:
            continue
        gpu = [x for x in quotas if x.resource == GPU]

        def total(values: list[int | None]) -> int | None:
            return None if any(v is None for v in values) else sum(v for v in values if v is not None)

        preemption = obj["spec"].get("preemption") or {}  # as stored: the reader has checked it
        out.append(QueueSpec(q.name, sum(x.nominal for x in gpu), q.cohort,
                             total([x.borrowing_limit for x in gpu]), total([x.lending_limit for x in gpu]),
                             reclaim_within_cohort=preemption.get("reclaimWithinCohort", "Never"),
                             within_cluster_queue=preemption.get("withinClusterQueue", "Never"),
                             quotas=quotas, weight=q.weight if "fairSharing" in obj["spec"] else None))
    return tuple(out)


def _flavors(wh: Warehouse, queues: tuple[QueueSpec, ...]) -> tuple[tuple[Flavor, ...], dict[str, str]]:
    """Step 2 of the module docstring; also node -> flavor for the inventory's matched nodes."""
    wanted: dict[str, dict[str, int]] = {}
    for q in queues:
        for x in q.quotas:
            per = wanted.setdefault(x.flavor, {})
            per[x.resource] = per.get(x.resource, 0) + x.nominal
    stored = {r["name"]: (json.loads(r["spec"] or "{}").get("nodeLabels") or {})
              for r in queue_objects(wh, "ResourceFlavor").iter_rows(named=True)}
    inventory = [(r["node"], json.loads(r["labels"] or "{}"), json.loads(r["allocatable"] or "{}"))
                 for r in nodes_now(wh).iter_rows(named=True)]
    flavors, node_flavor = [], {}
    for name, nominal in wanted.items():
        labels: dict[str, str] = {str(k): str(v) for k, v in stored.get(name, {}).items()}
        nodes = []
        for node, node_labels, allocatable in inventory if labels else []:
            if all(node_labels.get(k) == v for k, v in labels.items()):
                res = {r: int(float(allocatable[r])) for r in nominal if float(allocatable.get(r) or 0) > 0}
                if res:
                    nodes.append(res)
                    node_flavor[node] = name
        if not nodes:
            labels = {FLAVOR_LABEL: name}
            nodes = [{r: n for r, n in nominal.items() if n > 0}]
        flavors.append(Flavor(name, labels, tuple(nodes)))
    return tuple(flavors), node_flavor


def _job_name(rank: int, pod: str) -> str:
    """A Job name the apiserver accepts (DNS-1123, 63 characters), unique by its rank."""
    return f"w{rank:05d}-{re.sub(r'[^a-z0-9-]+', '-', pod.lower())}"[:63].rstrip("-")


def pending_samples(wh: Warehouse, start: datetime, end: datetime
                    ) -> dict[str, tuple[list[datetime], list[float]]]:
    """Per ClusterQueue: sample times in [start, end) and the pending workloads then (max over its
    flavor/resource rows: the count is the queue's, repeated per row)."""
    frame = queue_samples_after(wh, start - timedelta(microseconds=1), end)
    per: dict[str, dict[datetime, float]] = defaultdict(dict)
    for r in frame.iter_rows(named=True):
        seen = per[r["cluster_queue"]]
        seen[r["ts"]] = max(seen.get(r["ts"], 0.0), float(r["pending_workloads"] or 0.0))
    return {q: (sorted(v), [v[t] for t in sorted(v)]) for q, v in per.items()}


def arrivals(starts: list[datetime], times: list[datetime], pending: list[float],
             window_start: datetime) -> list[datetime]:
    """The arrival of each start (sorted), FIFO: the first sample time where started + pending
    reaches its rank, not after the start itself (module docstring)."""
    out = []
    for k, started_at in enumerate(starts, start=1):
        arrived = started_at
        for t, waiting in zip(times, pending, strict=True):
            if t >= started_at:
                break
            if bisect_right(starts, t) + waiting >= k:
                arrived = t
                break
        out.append(max(arrived, window_start))
    return out


def _workload_shape(r: dict[str, object], queue: QueueSpec, node_flavor: dict[str, str]
                    ) -> tuple[str, int, str | None] | None:
    """(resource, amount, pinned flavor) of a pod row, or None when step 3 skips it."""
    requests = {k: v for k, v in json.loads(str(r["gpu_requests"] or "{}")).items()
                if is_gpu_resource(k) and v}
    covered = {(x.flavor, x.resource) for x in queue.quotas}
    if len(requests) != 1:
        return None
    (resource, amount), = requests.items()
    if amount != int(amount) or resource not in {res for _, res in covered}:
        return None
    flavor = node_flavor.get(str(r["node"]))
    return resource, int(amount), flavor if (flavor, resource) in covered else None


def _unused_flavors(wh: Warehouse, start: datetime, end: datetime) -> set[str]:
    """Flavors whose Kueue usage is zero in every queue sample of [start, end) (step 3)."""
    used: dict[str, bool] = {}
    for r in queue_samples_after(wh, start - timedelta(microseconds=1), end).iter_rows(named=True):
        used[r["flavor"]] = used.get(r["flavor"], False) or bool(r["usage"])
    return {f for f, any_use in used.items() if not any_use}


def window_from_warehouse(wh: Warehouse, start: datetime, end: datetime) -> FromWarehouse:
    """Steps 1-4 of the module docstring; one-line `TwinBuildError` when the window is empty."""
    queues = {q.name: q for q in _queues(wh)}
    flavors, node_flavor = _flavors(wh, tuple(queues.values()))
    unused = _unused_flavors(wh, start, end)
    kueue_blind = {node for node, f in node_flavor.items() if f in unused}
    starts: dict[str, list[tuple[datetime, str, tuple[str, int, str | None], float]]] = defaultdict(list)
    skipped = 0
    for r in queued_pods_overlapping(wh, "LocalQueue", start, end).iter_rows(named=True):
        cq = target_cluster_queue(r["spec"])
        if r["node"] in kueue_blind:
            skipped += 1
            continue
        shape = _workload_shape(r, queues[cq], node_flavor) if cq is not None and cq in queues else None
        if cq is None or shape is None:
            skipped += 1
            continue
        run_min = (min(r["end_ts"], end) - max(r["start_ts"], start)).total_seconds() / 60
        rank = sum(len(v) for v in starts.values())
        starts[cq].append((r["start_ts"], _job_name(rank, r["pod"]), shape, max(run_min, 1 / 60)))
    if not starts:
        raise TwinBuildError(f"twin replay: no pod with whole GPUs or MIG instances ran through a "
                             f"LocalQueue between {start.isoformat()} and {end.isoformat()} in {wh.path}")
    pending = pending_samples(wh, start, end)
    workloads = []
    for cq, pods in starts.items():
        times, counts = pending.get(cq, ([], []))
        arrived_at = arrivals([p[0] for p in pods], times, counts, start)
        for (_, name, (resource, amount, flavor), run), arrived in zip(pods, arrived_at, strict=True):
            workloads.append(WorkloadSpec(name, (arrived - start).total_seconds() / 60, amount, cq, run,
                                          resource=resource, flavor=flavor))
    used = tuple(q for name, q in queues.items() if name in starts or q.cohort in
                 {queues[c].cohort for c in starts if queues[c].cohort})
    named = {x.flavor for q in used for x in q.quotas}
    window = Window(used, (), tuple(workloads), tuple(f for f in flavors if f.name in named))
    window.check()
    return FromWarehouse(window, skipped)
