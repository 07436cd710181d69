"""The twin's fixtures: its binaries, its own apiserver, a started twin.

The binaries come from the cache `python -m tools.twin_build build` fills, which `.ci/run` runs
before pytest (decision 0245); where they are missing, `twin_layout` builds them (slow once)
rather than skipping, like `k8s_cluster` builds kube-apiserver: a test CI can run never skips.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.k8s_testenv.cluster import LocalCluster
from tools.twin.harness import Twin
from tools.twin_build.versions import Layout, default_cache_root


@pytest.fixture(scope="session")
def twin_layout() -> Layout:
    """The twin's cache with every part built (a no-op when `.ci/run` has built them)."""
    from tools.twin_build.builder import build

    layout = Layout(default_cache_root())
    build(layout, echo=lambda line: print(line, file=sys.stderr))
    return layout


@pytest.fixture(scope="package")
def k8s_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The twin's own apiserver (issue 36: "against a fresh apiserver"), in place of the suite's
    shared one for these tests: that one holds other tests' pending pods, queues and Workloads,
    which the twin's Kueue would reconcile and whose quota state would race the twin's."""
    from tools.k8s_testenv.pytest_plugin import running_cluster

    with running_cluster(tmp_path_factory.mktemp("twin-cluster")) as cluster:
        yield cluster


@pytest.fixture
def twin(twin_layout: Layout, k8s_cluster: LocalCluster, tmp_path: Path) -> Iterator[Twin]:
    with Twin(k8s_cluster, twin_layout, tmp_path / "twin") as started:
        yield started
