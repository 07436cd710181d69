"""pytest plugin: the session fixture `k8s_cluster`, a real etcd + kube-apiserver with Kueue CRDs.

Enable it with `pytest_plugins = ["tools.k8s_testenv.pytest_plugin"]` (tests/conftest.py does).
The binaries come from the cache that `python -m tools.k8s_testenv build` fills; if they are
missing the fixture builds them (slow once) rather than skipping, because a test that CI can run
must never skip (while `.ci/run` builds them in the background, it waits under the build lock).
Every test that uses the fixture gets the `k8s` marker automatically, and their modules run
after all the others.

Fixtures:
- `k8s_cluster` (session): a started `LocalCluster`: `.kubeconfig`, `.server`, `.admin_token`,
  `.api_client()`, `.api_client(impersonate=...)`, `.service_account_client(ns, name)`.
- `k8s_namespace` (function): a fresh namespace name, created. Namespaces are never deleted:
  without kube-controller-manager a deleted namespace stays Terminating forever.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.k8s_testenv.builder import build
from tools.k8s_testenv.cluster import LocalCluster
from tools.k8s_testenv.versions import Layout, default_cache_root

_namespace_counter = itertools.count(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--k8s-testenv-no-crds", action="store_true", default=False,
                     help="start the k8s_cluster fixture without the Kueue CRDs (faster; hygiene tests)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "k8s: needs the real kube-apiserver test environment")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use the cluster, and run their modules after all the others (each
    module's tests together and in their order, the modules in theirs): a cold `.ci/run` builds
    the apiserver in the background while the rest of the suite runs (decision 0253)."""
    with_cluster = set()
    for item in items:
        if "k8s_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.k8s)
            with_cluster.add(_module_of(item))
    items.sort(key=lambda item: _module_of(item) in with_cluster)  # stable: the order is kept within


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.fixture(scope="session")
def k8s_cluster(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("k8s-testenv"),
                         install_crds=not pytestconfig.getoption("--k8s-testenv-no-crds")) as cluster:
        yield cluster


@contextlib.contextmanager
def running_cluster(folder: Path, *, install_crds: bool = True) -> Iterator[LocalCluster]:
    """A started etcd + kube-apiserver in `folder` (built or taken from the cache first), stopped
    on exit: the suite's shared cluster, and a cluster of its own for tests that need one."""
    layout = Layout(default_cache_root())
    build(layout, echo=lambda line: print(line, file=sys.stderr))
    cluster = LocalCluster(layout, folder, install_crds=install_crds)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def k8s_namespace(k8s_cluster: LocalCluster, request: pytest.FixtureRequest) -> str:
    from kubernetes import client

    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t{next(_namespace_counter)}-{base}"[:63].rstrip("-")
    with k8s_cluster.api_client() as api:
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name
