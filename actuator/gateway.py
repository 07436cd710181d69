"""The one gateway to the cluster: every read and write the actuator makes goes through here.

Why one module: the rules that keep writes safe live in one place and cannot be forgotten by a
caller (kopf's habit):

1. Errors are mapped by HTTP status to `core.errors` classes (409 conflict, 404 not found,
   401/403 forbidden, 400/415/422 invalid, 429/5xx/connection temporary). Callers never see a
   `kubernetes` exception.
2. Temporary errors are retried with capped exponential backoff and jitter; permanent ones are
   raised at once (409 is handled by `update`, which re-reads, not by blind retry).
3. Every write is sent twice: first with `dryRun=All` (admission, validation and CRD schema run,
   nothing is stored), then for real.
4. Object writes are JSON merge patches that carry `metadata.resourceVersion`, so the API server
   refuses them with 409 when the object moved since it was read. Strategic-merge patch is never
   used (custom resources reject it, and its list semantics hide what is written).

Objects travel as plain JSON dicts (camelCase, exactly what the API server sends), which keeps
audit records and tests readable and lets custom resources and core objects share one path.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import kubernetes
import urllib3

from gpuledger.core.errors import (
    ClusterError,
    ConfigError,
    ConflictError,
    InvalidError,
    NotFoundError,
    TemporaryClusterError,
    error_for_status,
)

FIELD_MANAGER = "gpuledger"
MERGE_PATCH = "application/merge-patch+json"
KUEUE_API = "kueue.x-k8s.io/v1beta2"

Obj = dict[str, Any]


class EvictionBlockedError(ClusterError):
    """HTTP 429 on an eviction: a PodDisruptionBudget does not allow this pod to go now."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Where an object lives in the API: its kind (for messages) and its REST path."""

    kind: str
    name: str
    namespace: str = ""
    path: str = ""

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


def node_ref(name: str) -> ObjectRef:
    return ObjectRef("Node", name, "", f"/api/v1/nodes/{quote(name, safe='')}")


def pod_ref(namespace: str, name: str) -> ObjectRef:
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
    return ObjectRef("Pod", name, namespace, path)


def configmap_ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef(
        "ConfigMap", name, namespace,
        f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}",
    )


def cluster_queue_ref(name: str) -> ObjectRef:
    return ObjectRef("ClusterQueue", name, "", f"/apis/{KUEUE_API}/clusterqueues/{quote(name, safe='')}")


@dataclass(frozen=True)
class WriteRecord:
    """One write the gateway made (or, in dry-run mode, would have made)."""

    object: str
    verb: str
    patch: Obj
    dry_run: bool


@dataclass
class RetryPolicy:
    """How temporary errors are retried: `attempts` tries in all, backoff doubling from `base_s`."""

    attempts: int = 5
    base_s: float = 0.2
    max_s: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def delays(self) -> Iterator[float]:
        delay = self.base_s
        for _ in range(self.attempts - 1):
            yield min(self.max_s, delay) * (0.5 + random.random() / 2)
            delay *= 2


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _status_message(body: bytes | str | None) -> str:
    """The API server's `Status.message`, or the raw body when it is not a Status."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
        return _one_line(text)
    if isinstance(data, dict) and data.get("message"):
        return _one_line(str(data["message"]))
    return _one_line(text)


def map_status(status: int, what: str, message: str, *, eviction: bool = False) -> ClusterError:
    """The `core.errors` class for an HTTP status, with a self-contained one-line message."""
    text = f"{what}: HTTP {status}{': ' + message if message else ''}"
    if status == 429 and eviction:
        return EvictionBlockedError(text)
    return error_for_status(status, text, hint=True)


class ClusterGateway:
    """A connection to one cluster with the safety rules above; use as a context manager."""

    def __init__(
        self, api_client: kubernetes.client.ApiClient, *, retry: RetryPolicy | None = None,
        request_timeout_s: float = 30.0, source: str = "kubeconfig",
    ) -> None:
        self.api = api_client
        self.retry = retry or RetryPolicy()
        self.request_timeout_s = request_timeout_s
        self.source = source
        self.writes: list[WriteRecord] = []
        self._dry_run_only = False

    # 1. Construction --------------------------------------------------------------------
    @classmethod
    def from_kubeconfig(
        cls, path: str | None, context: str | None = None, *, retry: RetryPolicy | None = None,
    ) -> ClusterGateway:
        """Connect with a kubeconfig file (`None`: in-cluster service account, else ~/.kube/config)."""
        from kubernetes import config as kconfig

        if path is None:
            try:
                configuration = kubernetes.client.Configuration()
                kconfig.load_incluster_config(client_configuration=configuration)
                return cls(kubernetes.client.ApiClient(configuration), retry=retry, source="in-cluster")
            except kconfig.ConfigException:
                pass  # not inside a pod: fall through to the default kubeconfig
        try:
            client = kconfig.new_client_from_config(config_file=path, context=context)
        except (kconfig.ConfigException, OSError, ValueError) as exc:
            where = path or "~/.kube/config"
            raise ConfigError(f"{where}: cannot load kubeconfig ({_one_line(str(exc))})") from None
        return cls(client, retry=retry, source=path or "~/.kube/config")

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> ClusterGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def dry_run_only(self) -> Iterator[None]:
        """Inside this block every write is sent with dryRun=All only, never for real."""
        previous = self._dry_run_only
        self._dry_run_only = True
        try:
            yield
        finally:
            self._dry_run_only = previous

    @property
    def is_dry_run(self) -> bool:
        return self._dry_run_only

    # 2. The one request path -----------------------------------------------------------
    def request(
        self, method: str, path: str, *, what: str, query: Mapping[str, str] | None = None,
        body: Any = None, content_type: str | None = None, eviction: bool = False,
    ) -> Obj:
        """Send one request, retrying temporary failures; return the decoded JSON body."""
        delays = self.retry.delays()
        while True:
            try:
                return self._send(method, path, what=what, query=query, body=body,
                                  content_type=content_type, eviction=eviction)
            except TemporaryClusterError:
                delay = next(delays, None)
                if delay is None:
                    raise
                self.retry.sleep(delay)

    def _send(
        self, method: str, path: str, *, what: str, query: Mapping[str, str] | None, body: Any,
        content_type: str | None, eviction: bool,
    ) -> Obj:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = list((query or {}).items())
        serialized = self.api.param_serialize(
            method=method, resource_path=path, query_params=params or None,
            header_params=headers, body=body, auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(*serialized, _request_timeout=self.request_timeout_s)
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemporaryClusterError(
                f"{what}: cannot reach the API server ({_one_line(str(exc))})"
            ) from None
        if not 200 <= response.status <= 299:
            raise map_status(response.status, what, _status_message(data), eviction=eviction)
        if not data:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError:
            raise ClusterError(f"{what}: the API server answered something that is not JSON") from None
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    # 3. Reads ---------------------------------------------------------------------------
    def get(self, ref: ObjectRef) -> Obj:
        return self.request("GET", ref.path, what=f"read {ref}")

    def list_objects(
        self, path: str, *, what: str, field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> list[Obj]:
        query: dict[str, str] = {}
        if field_selector:
            query["fieldSelector"] = field_selector
        if label_selector:
            query["labelSelector"] = label_selector
        return list(self.request("GET", path, what=what, query=query).get("items") or [])

    def get_node(self, name: str) -> Obj:
        return self.get(node_ref(name))

    def pods_on_node(self, node: str) -> list[Obj]:
        return self.list_objects("/api/v1/pods", what=f"list pods on Node/{node}",
                                 field_selector=f"spec.nodeName={node}")

    def get_cluster_queue(self, name: str) -> Obj:
        return self.get(cluster_queue_ref(name))

    # 4. Guarded writes ------------------------------------------------------------------
    def patch(self, ref: ObjectRef, patch: Obj, resource_version: str) -> Obj:
        """Merge-patch `ref` with a resourceVersion precondition: dry run first, then for real.

        Returns the object as stored (in dry-run mode: as it would be stored).
        """
        if not resource_version:
            raise InvalidError(f"patch {ref}: refusing an unguarded write (no resourceVersion was read)")
        body = _with_resource_version(patch, resource_version)
        what = f"patch {ref}"
        dry = self.request("PATCH", ref.path, what=what + " (dry run)",
                           query={"dryRun": "All", "fieldManager": FIELD_MANAGER},
                           body=body, content_type=MERGE_PATCH)
        self.writes.append(WriteRecord(str(ref), "patch", patch, self._dry_run_only))
        if self._dry_run_only:
            return dry
        return self.request("PATCH", ref.path, what=what, query={"fieldManager": FIELD_MANAGER},
                            body=body, content_type=MERGE_PATCH)

    def update(
        self, ref: ObjectRef, mutate: Callable[[Obj], Obj | None], *, attempts: int = 5,
    ) -> tuple[Obj, Obj, bool]:
        """Read-modify-write with conflict handling: returns (before, after, changed).

        `mutate(current)` returns the merge patch to send, or None when the object already has
        the wanted state; it raises when the object no longer allows the change (for example a
        plan that does not hold any more). On 409 the object is re-read and `mutate` is asked
        again, so a change is only re-applied when it still makes sense.
        """
        for attempt in range(attempts):
            current = self.get(ref)
            patch = mutate(current)
            if patch is None:
                return current, current, False
            try:
                after = self.patch(ref, patch, str(current.get("metadata", {}).get("resourceVersion", "")))
            except ConflictError:
                if attempt == attempts - 1:
                    raise
                continue
            return current, after, True
        raise AssertionError("unreachable")  # pragma: no cover

    def evict(self, namespace: str, pod: str) -> None:
        """Evict a pod through the Eviction API (PodDisruptionBudgets apply): dry run, then real.

        Raises `EvictionBlockedError` when a budget refuses; a pod that is already gone is fine.
        """
        ref = pod_ref(namespace, pod)
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod, "namespace": namespace}}
        what = f"evict {ref}"
        try:
            self.request("POST", ref.path + "/eviction", what=what + " (dry run)",
                         query={"dryRun": "All"}, body=body,
                         eviction=True)
            self.writes.append(WriteRecord(str(ref), "evict", {}, self._dry_run_only))
            if not self._dry_run_only:
                self.request("POST", ref.path + "/eviction", what=what, body=body, eviction=True)
        except NotFoundError:
            return

    def exists(self, ref: ObjectRef) -> bool:
        try:
            self.get(ref)
        except NotFoundError:
            return False
        return True


def _with_resource_version(patch: Obj, resource_version: str) -> Obj:
    metadata = dict(patch.get("metadata") or {})
    metadata["resourceVersion"] = resource_version
    return {**patch, "metadata": metadata}
