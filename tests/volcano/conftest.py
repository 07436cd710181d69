"""Fixtures of the Volcano tests: Volcano's upstream CRDs installed into the real test
kube-apiserver (from the shared folder, never copied into the project), settings, a warehouse.

The CRDs live in `shared/crds/volcano/` beside the checkout (`../shared` from the main
checkout, `../../shared` from a helper worktree), or beside the repository a clean clone was
made from (its local `origin`, which is how CI clones main), or under `$GPULEDGER_SHARED`: the
first that exists is used, and a missing folder fails the tests (they must never skip).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.warehouse import Warehouse
from tests.actuator.conftest import make_settings
from tests.shared_folder import shared_candidates

ROOT = Path(__file__).resolve().parents[2]


def volcano_crd_folder() -> Path:
    for base in shared_candidates():
        folder = base / "crds" / "volcano"
        if (folder / "scheduling.volcano.sh_queues.yaml").is_file():
            return folder
    raise FileNotFoundError(f"Volcano CRDs not found in shared/crds/volcano beside {ROOT}")


@pytest.fixture(scope="session")
def volcano_cluster(k8s_cluster):
    """The session's test cluster with Volcano's Queue, PodGroup and Job CRDs Established."""
    from tools.k8s_testenv.crds import install_crds

    api = k8s_cluster.api_client()
    try:
        names = install_crds(api, volcano_crd_folder())
    finally:
        api.close()
    assert "queues.scheduling.volcano.sh" in names
    return k8s_cluster


@pytest.fixture
def settings():
    return make_settings()


@pytest.fixture
def alice(settings):
    from gpuledger.core.access import resolve_roles

    return resolve_roles("alice", [], settings.access)


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse.open(tmp_path / "wh.duckdb") as warehouse:
        yield warehouse


@pytest.fixture
def gateway(volcano_cluster):
    from gpuledger.actuator.gateway import ClusterGateway, RetryPolicy

    with ClusterGateway(volcano_cluster.api_client(), retry=RetryPolicy(attempts=3, base_s=0.05)) as gw:
        yield gw
