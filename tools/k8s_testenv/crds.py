"""Install CustomResourceDefinitions from YAML files and wait until the API serves them.

Why wait for `Established`: a CRD object exists as soon as it is created, but the API server
answers 404 for its resources until it sets the Established condition; tests that create a
ClusterQueue right after start-up would fail at random without this wait.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from tools.k8s_testenv.errors import K8sTestEnvError


def load_crds(folder: Path, *, libyaml: bool = True) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition document in `folder/*.yaml`, sorted by file name."""
    # libyaml's loader parses Kueue's 2 MB of CRDs in about a second; the pure-Python one takes ~9 s.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if libyaml else yaml.SafeLoader
    docs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=loader):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    if not docs:
        raise K8sTestEnvError(f"k8s-testenv: no CustomResourceDefinition in {folder}/*.yaml")
    return docs


def install_crds(
    api: client.ApiClient, folder: Path, timeout_s: float = 120.0, *, workers: int = 4, libyaml: bool = True
) -> list[str]:
    """Create the CRDs found in `folder` (existing ones are kept); return their names once Established.

    The documents go through the dynamic client as plain JSON: the typed client would first
    round-trip them through its generated models, a needless risk for large OpenAPI schemas.
    """
    ext = client.ApiextensionsV1Api(api)
    crd_resource = dynamic.DynamicClient(api).resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    docs = load_crds(folder, libyaml=libyaml)
    names = [doc["metadata"]["name"] for doc in docs]

    def create(doc: dict[str, Any]) -> None:
        try:
            crd_resource.create(body=doc)
        except ApiException as exc:
            if exc.status != 409:
                raise K8sTestEnvError(
                    f"k8s-testenv: creating CRD {doc['metadata']['name']} failed: "
                    f"HTTP {exc.status} {exc.reason}: {exc.body}"
                ) from None

    # A few creates in flight let the server overlap its per-CRD work (about a third faster).
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(create, docs))
    wait_established(ext, names, timeout_s)
    return names


def wait_established(ext: client.ApiextensionsV1Api, names: Iterable[str], timeout_s: float) -> None:
    pending = set(names)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            crd = ext.read_custom_resource_definition(name)
            conditions = (crd.status.conditions or []) if crd.status else []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                pending.discard(name)
        if pending:
            time.sleep(0.1)
    if pending:
        raise K8sTestEnvError(
            f"k8s-testenv: CRDs not Established after {timeout_s:.0f}s: {', '.join(sorted(pending))}"
        )
