"""Create the simulator's Kubernetes objects (Nodes, Namespaces, Pods, ...) in a real cluster.

Test tooling (never installed): it writes to a cluster, which in the product only the actuator
does; tests use it to give the collectors and the actuator a populated kube-apiserver.

Why more than `kubectl create`: the API server drops `status` on create for most kinds (a Pod is
always born `Pending` with no IP), yet the collectors read phases, capacity and allocatable. So
each object is created and, when its manifest carries a `status`, that status is written
through the status subresource, the way a kubelet or a device plugin would.

Steps of `load_manifests`:
1. Order the manifests: Namespaces first, then cluster-scoped kinds (Nodes), then the rest, so
   that no namespaced object arrives before its namespace (NamespaceLifecycle admission).
2. For each manifest, find its resource through discovery (any kind the server serves, CRDs
   included) and create it; an existing object is skipped or is an error, as asked.
3. Write `status` through the status subresource with a merge patch, if the manifest has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from gpuledger.core.errors import ClusterError, InputError

MERGE_PATCH = "application/merge-patch+json"
_ORDER = {"Namespace": 0, "CustomResourceDefinition": 0, "Node": 1, "PriorityClass": 1}


@dataclass
class LoadReport:
    """Counts of what happened, by kind: created, status written, skipped (already existed)."""

    created: dict[str, int] = field(default_factory=dict)
    status_written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def _bump(self, bucket: dict[str, int], kind: str) -> None:
        bucket[kind] = bucket.get(kind, 0) + 1


def ordered(manifests: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Namespaces, then cluster-scoped infrastructure, then everything else; stable otherwise."""
    items = list(manifests)
    for n, item in enumerate(items):
        if not isinstance(item, Mapping) or "kind" not in item or "apiVersion" not in item:
            raise InputError(f"kube manifest #{n}: expected a mapping with apiVersion and kind")
        if not (item.get("metadata") or {}).get("name"):
            raise InputError(f"kube manifest #{n} ({item['kind']}): metadata.name is missing")
    return sorted(items, key=lambda m: _ORDER.get(str(m["kind"]), 2))


def load_manifests(
    api: client.ApiClient,
    manifests: Iterable[Mapping[str, Any]],
    *,
    on_exists: Literal["skip", "error"] = "skip",
) -> LoadReport:
    """Create every manifest (see module docstring); raise ClusterError naming the object on failure."""
    dyn = dynamic.DynamicClient(api)
    report = LoadReport()
    resources: dict[tuple[str, str], Any] = {}
    for manifest in ordered(manifests):
        api_version, kind = str(manifest["apiVersion"]), str(manifest["kind"])
        meta = manifest["metadata"]
        label = f"{kind} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}{meta['name']}"
        key = (api_version, kind)
        if key not in resources:
            try:
                resources[key] = dyn.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                raise InputError(
                    f"kube manifest {label}: the server does not serve {api_version} {kind}"
                ) from None
        resource = resources[key]
        # A kind without a status subresource (Volcano's PodGroup CRD) keeps status on create.
        body = {k: v for k, v in manifest.items() if k != "status" or not _has_status_subresource(resource)}
        namespace = meta.get("namespace") if resource.namespaced else None
        try:
            resource.create(body=body, namespace=namespace)
            report._bump(report.created, kind)
        except ApiException as exc:
            if exc.status == 409 and on_exists == "skip":
                report._bump(report.skipped, kind)
                continue
            raise ClusterError(f"creating {label} failed: HTTP {exc.status} {_reason(exc)}") from None
        status = manifest.get("status")
        if status and _has_status_subresource(resource):
            try:
                resource.status.patch(body={"status": status}, name=meta["name"], namespace=namespace,
                                      content_type=MERGE_PATCH)
            except ApiException as exc:
                raise ClusterError(
                    f"writing status of {label} failed: HTTP {exc.status} {_reason(exc)}"
                ) from None
            report._bump(report.status_written, kind)
    return report


def _has_status_subresource(resource: Any) -> bool:
    return "status" in (getattr(resource, "subresources", None) or {})


def _reason(exc: ApiException) -> str:
    import json

    try:
        return str(json.loads(exc.body or "").get("message", exc.reason))
    except (TypeError, ValueError):
        return str(exc.reason)
