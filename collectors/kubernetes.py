"""Inventory from the Kubernetes API (read-only): nodes, namespaces, GPU pods, Kueue objects.

Lists are paginated (`limit` + `continue`). A continue token expires when etcd compacts past
its resourceVersion: the server answers 410 Gone, and the list restarts from scratch (a full
relist gives one consistent snapshot; mixing pages from two snapshots would not). Relists are
bounded so a cluster compacting faster than we page fails clearly instead of looping.
Answers are read as plain JSON (`_preload_content=False`): faster than the client's model
objects, and the frames need only a few fields.

Frames: `nodes` (GFD labels, capacity/allocatable incl. `nvidia.com/mig-*`, MIG config and
state, pool, sharing mode), `namespaces` (team from the label key or the fallback rules),
`pods` (only pods requesting GPU resources: `nvidia.com/gpu`, `nvidia.com/mig-*`,
`nvidia.com/gpumem`, `nvidia.com/gpumem-percentage`, `nvidia.com/gpucores`, or placed by HAMi),
HAMi's `gpus` (the cards of each `hami.io/node-nvidia-register` annotation, `vgpu`) and
`vgpu_allocations` (each pod's `hami.io/vgpu-devices-allocated`: which card, how much;
`collectors.hami`), the DRA frames of `collectors.dra`
(ResourceSlices, ResourceClaims, the pods reserving them, each GPU node's plane), `queues` (the
queue systems' objects, through the queue seam `collectors.queues`: for Kueue, ClusterQueues,
LocalQueues, ResourceFlavors and Cohorts of `kueue.x-k8s.io/v1beta2`; for Volcano, Queues and
PodGroups; absent CRDs give no rows), `pod_priorities` and `preemptions` (`collectors.preemption`),
`pending_workloads` and `queue_usage` (`collectors.pending`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import polars as pl
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from gpuledger.collectors import hami, pending, preemption
from gpuledger.collectors.dra import DraObjects, frames_from_objects
from gpuledger.collectors.queues import QueueCollector, queue_collector
from gpuledger.collectors.statuses import Statuses, list_statuses
from gpuledger.core.config import Settings, utcnow
from gpuledger.core.errors import ClusterError, NotFoundError, TemporaryClusterError, error_for_status
from gpuledger.core.frames import NAMESPACES, NODES, PODS, QUEUES, polars_schema
from gpuledger.core.gfd import replicated
from gpuledger.core.labels import pool_of
from gpuledger.core.mig import canonical_model
from gpuledger.core.pricing import strip_gfd_suffix
from gpuledger.core.teams import resolve_team

GPU_RESOURCE_PREFIXES = (
    "nvidia.com/gpu", "nvidia.com/mig-", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/vgpu",
)
MAX_RELISTS = 3
Lister = Callable[..., Any]


def _is_gpu_resource(name: str) -> bool:
    return any(name == p or name.startswith(p) for p in GPU_RESOURCE_PREFIXES)


def _error(exc: ApiException, what: str) -> ClusterError:
    reason = exc.reason or ""
    with contextlib.suppress(ValueError):
        reason = json.loads(exc.body or "{}").get("message", reason)
    return error_for_status(exc.status or 0, f"listing {what} failed: HTTP {exc.status} {reason}")


def paginate(list_fn: Lister, what: str, *, page_size: int = 500, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a list call, page by page; restart on 410 (expired continue)."""
    for _attempt in range(MAX_RELISTS + 1):
        items: list[dict[str, Any]] = []
        token: str | None = None
        try:
            while True:
                extra = {"_continue": token} if token else {}
                response = list_fn(limit=page_size, _preload_content=False, **extra, **kwargs)
                page = json.loads(response.data)
                items.extend(page.get("items") or [])
                token = (page.get("metadata") or {}).get("continue") or None
                if not token:
                    break
        except ApiException as exc:
            if exc.status == 410:
                continue  # the continue token expired: relist from the start
            raise _error(exc, what) from None
        yield from items
        return
    raise TemporaryClusterError(f"listing {what}: continue token expired {MAX_RELISTS + 1} times; "
                                "etcd compacts faster than the pages arrive (raise the page size)")


class KubernetesCollector:
    """Snapshots of cluster inventory as frames; never writes to the cluster."""

    def __init__(self, api: client.ApiClient, settings: Settings, *, page_size: int = 500,
                 now: Callable[[], datetime] = utcnow,
                 queue_system: str | Sequence[str] | None = None) -> None:
        self.api = api
        self.settings = settings
        self.page_size = page_size
        self.now = now
        if queue_system is None:
            queue_system = settings.queues.systems  # Kueue alone unless configured
        names = (queue_system,) if isinstance(queue_system, str) else tuple(queue_system)
        self.queue_systems: tuple[QueueCollector, ...] = tuple(queue_collector(n) for n in names)
        """Every queue system listed (Kueue and Volcano may run side by side)."""
        self.queue_system: QueueCollector = self.queue_systems[0]
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    @classmethod
    def from_kubeconfig(cls, path: str, settings: Settings, **kwargs: Any) -> KubernetesCollector:
        try:
            api = config.new_client_from_config(config_file=path, context=settings.kubernetes.context)
        except (config.ConfigException, OSError) as exc:
            raise ClusterError(f"kubeconfig {path}: cannot load ({exc})") from None
        return cls(api, settings, **kwargs)

    def snapshot(self) -> dict[str, pl.DataFrame]:
        at = self.now()
        items = list(paginate(self.core.list_pod_for_all_namespaces, "pods", page_size=self.page_size))
        node_items = list(paginate(self.core.list_node, "nodes", page_size=self.page_size))
        pods = self.pods(at, items)
        shared, hami_nodes = hami.frames_from_api(node_items, items, at)
        dra = frames_from_objects(self.dra_objects(), at)
        listed = list_statuses(items, core=self.core, custom=self.custom,  # once, for every reader
                               resource=client.ResourceV1Api(self.api),
                               page=partial(paginate, page_size=self.page_size))
        return {
            "nodes": self.nodes(at, node_items, hami_nodes),
            "namespaces": self.namespaces(at),
            "pods": pods,
            "queues": self.queues(at, listed),
            **dra,
            **shared,
            "gpus": pl.concat([dra["gpus"], shared["gpus"]]),  # DRA's cards and HAMi's, both
            **preemption.frames(items, pods, at, listed),
            **pending.frames(items, at, listed),
        }

    # Frames ------------------------------------------------------------------------------
    def nodes(self, at: datetime, items: list[dict[str, Any]] | None = None,
              hami_nodes: set[str] | frozenset[str] = frozenset()) -> pl.DataFrame:
        """Node rows; `hami_nodes` are nodes HAMi was seen sharing (a pod it placed there)."""
        if items is None:
            items = list(paginate(self.core.list_node, "nodes", page_size=self.page_size))
        rows = [_node_row(item, at, hami_nodes) for item in items]
        return pl.DataFrame(rows, schema=polars_schema(NODES))

    def namespaces(self, at: datetime) -> pl.DataFrame:
        rows = []
        for item in paginate(self.core.list_namespace, "namespaces", page_size=self.page_size):
            meta = item.get("metadata") or {}
            labels = meta.get("labels") or {}
            rows.append({
                "namespace": meta["name"],
                "team": resolve_team(meta["name"], labels, self.settings.teams),
                "labels": json.dumps(labels, sort_keys=True), "observed_at": at,
            })
        return pl.DataFrame(rows, schema=polars_schema(NAMESPACES))

    def pods(self, at: datetime, items: list[dict[str, Any]] | None = None) -> pl.DataFrame:
        rows = []
        if items is None:
            items = list(paginate(self.core.list_pod_for_all_namespaces, "pods", page_size=self.page_size))
        labels = tuple(s.pod_queue_label for s in self.queue_systems)
        for item in items:
            row = _pod_row(item, at, labels)
            if row is not None:
                rows.append(row)
        return pl.DataFrame(rows, schema=polars_schema(PODS))

    def dra_objects(self) -> DraObjects:
        """The DRA objects of `resource.k8s.io/v1` (`collectors.dra`) and the pods and nodes they
        concern; none where the API is not served (a cluster older than 1.34 has no DRA)."""
        res, size = client.ResourceV1Api(self.api), self.page_size
        try:
            found = DraObjects(
                slices=list(paginate(res.list_resource_slice, "resourceslices", page_size=size)),
                claims=list(paginate(res.list_resource_claim_for_all_namespaces, "resourceclaims",
                                     page_size=size)),
                device_classes=list(paginate(res.list_device_class, "deviceclasses", page_size=size)),
            )
        except NotFoundError:
            return DraObjects()
        if found.claims or found.slices:
            pods = paginate(self.core.list_pod_for_all_namespaces, "pods", page_size=size)
            found.pods = [p for p in pods if (p.get("spec") or {}).get("resourceClaims")]
            found.nodes = list(paginate(self.core.list_node, "nodes", page_size=size))
        return found

    def queues(self, at: datetime, listed: Statuses | None = None) -> pl.DataFrame:
        """The queue system's objects (`queue_system.resources`), one row each; a kind the
        snapshot's `listed` statuses hold already is not listed again."""
        rows: list[dict[str, Any]] = []
        for system, res in ((s, r) for s in self.queue_systems for r in s.resources):
            known = listed.custom(res.group, res.version, res.plural) if listed is not None else None
            if known is not None:
                rows.extend(system.row(res, item, at) for item in known)
                continue
            try:
                items = list(paginate(self.custom.list_cluster_custom_object, f"{res.plural}.{res.group}",
                                      page_size=self.page_size, group=res.group,
                                      version=res.version, plural=res.plural))
            except NotFoundError:
                continue  # the queue system (or this kind) is not installed
            rows.extend(system.row(res, item, at) for item in items)
        return pl.DataFrame(rows, schema=polars_schema(QUEUES))


def _sharing_mode(labels: dict[str, str], capacity: dict[str, str], hami_node: bool) -> str:
    """MIG from `nvidia.com/mig-*` capacity; HAMi from its own marks (`hami.io/node-nvidia-register`
    or pods it placed), never from `nvidia.com/gpumem` capacity (HAMi advertises none) or the
    chart's default `gpu=on` selector (an admin's label); time-slicing from the replica label."""
    if any(k.startswith("nvidia.com/mig-") for k in capacity):
        return "mig"
    if hami_node:
        return "vgpu"
    if replicated(labels) is not None:  # time-slicing or MPS, as GFD labels it (core.gfd)
        return "timeslice"
    return "exclusive"


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _node_row(item: dict[str, Any], at: datetime,
              hami_nodes: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    meta = item.get("metadata") or {}
    labels: dict[str, str] = meta.get("labels") or {}
    status = item.get("status") or {}
    capacity: dict[str, str] = status.get("capacity") or {}
    product = strip_gfd_suffix(labels.get("nvidia.com/gpu.product", ""))
    mode = _sharing_mode(labels, capacity, hami.is_hami_node(item) or meta["name"] in hami_nodes)
    return {
        "node": meta["name"], "pool": pool_of(labels),
        "model": canonical_model(product) if product else None,
        "gpu_count": _int(labels.get("nvidia.com/gpu.count")),
        "sharing_mode": mode,
        "replicas": _int(labels.get("nvidia.com/gpu.replicas")) if mode == "timeslice" else None,
        "mig_config": labels.get("nvidia.com/mig.config"),
        "mig_config_state": labels.get("nvidia.com/mig.config.state"),
        "labels": json.dumps(labels, sort_keys=True),
        "capacity": json.dumps(capacity, sort_keys=True),
        "allocatable": json.dumps(status.get("allocatable") or {}, sort_keys=True),
        "resource_version": meta.get("resourceVersion"), "observed_at": at,
    }


def _pod_row(item: dict[str, Any], at: datetime, queue_labels: str | Sequence[str]) -> dict[str, Any] | None:
    spec = item.get("spec") or {}
    requests: dict[str, float] = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, amount in wanted.items():
            if _is_gpu_resource(name):
                requests[name] = requests.get(name, 0.0) + _quantity(amount)
    meta = item.get("metadata") or {}
    if not requests and hami.ALLOCATED not in (meta.get("annotations") or {}):
        return None
    owners = meta.get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
    status = item.get("status") or {}
    started = status.get("startTime") or meta.get("creationTimestamp")
    start_ts = datetime.fromisoformat(started.replace("Z", "+00:00")) if started else at
    labels = meta.get("labels") or {}
    keys = (queue_labels,) if isinstance(queue_labels, str) else queue_labels
    return {
        "namespace": meta.get("namespace"), "pod": meta.get("name"), "node": spec.get("nodeName"),
        "queue": next((labels[k] for k in keys if labels.get(k)), None),
        "owner_kind": owner.get("kind"), "owner_name": owner.get("name"),
        "gpu_requests": json.dumps(requests, sort_keys=True), "labels": json.dumps(labels, sort_keys=True),
        "start_ts": min(start_ts, at), "end_ts": at,
    }


def _quantity(text: str | int | float) -> float:
    """Kubernetes quantities as they appear for GPU resources (integers, `k`/`Mi` suffixes)."""
    value = str(text)
    units = {"k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "m": 1e-3}
    for suffix in sorted(units, key=len, reverse=True):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * units[suffix]
    return float(value)
