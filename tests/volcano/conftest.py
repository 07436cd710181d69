"""Fixtures of the Volcano tests: Volcano's upstream CRDs installed into the real test
kube-apiserver (from the shared folder, never copied into the project), settings, a warehouse.

The CRDs live in `shared/crds/volcano/` beside the checkout (`../shared` from the main
checkout, `../../shared` from a helper worktree), or beside the repository a clean clone was
made from (its local `origin`, which is how CI clones main), or under `$GPULEDGER_SHARED`: the
first that exists is used, and a missing folder fails the tests (they must never skip).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.warehouse import Warehouse
from tests.actuator.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]


def _shared_candidates() -> list[Path]:
    found = [Path(os.environ["GPULEDGER_SHARED"])] if os.environ.get("GPULEDGER_SHARED") else []
    found += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    origin = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                            capture_output=True, text=True, check=False).stdout.strip()
    if origin and Path(origin).is_dir():  # a clone of a local checkout: its shared folder
        found.append(Path(origin).resolve().parent / "shared")
    return found


def volcano_crd_folder() -> Path:
    for base in _shared_candidates():
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
