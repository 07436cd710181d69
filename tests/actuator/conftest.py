"""Fixtures for the actuator tests: settings with an admin and a viewer, a warehouse file, the
admin's view of the test cluster, a gateway, and the MIG Manager emulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.core.access import Principal, resolve_roles
from gpuledger.core.config import AccessSettings, KubernetesSettings, PlanSettings, RoleBinding, Settings
from gpuledger.warehouse import Warehouse

STATE_TIMEOUT_S = 10.0  # generous: the CI machine is shared and often loaded


def make_settings(namespace: str = "gpu-operator", name: str = "mig-parted", *,
                  state_timeout_s: float = STATE_TIMEOUT_S, nodes_in_parallel: int = 1) -> Settings:
    return Settings(
        access=AccessSettings(roles=(
            RoleBinding(subject="alice", role="admin"),
            RoleBinding(subject="platform", kind="group", role="admin"),
            RoleBinding(subject="bob", role="viewer"),
        )),
        plans=PlanSettings(state_timeout_s=state_timeout_s, nodes_in_parallel=nodes_in_parallel),
        kubernetes=KubernetesSettings(mig_configmap_namespace=namespace, mig_configmap_name=name),
    )


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture
def alice(settings: Settings) -> Principal:
    return resolve_roles("alice", [], settings.access)


@pytest.fixture
def bob(settings: Settings) -> Principal:
    return resolve_roles("bob", [], settings.access)


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse.open(tmp_path / "wh.duckdb") as warehouse:
        yield warehouse


# Real cluster ------------------------------------------------------------------------------------
@pytest.fixture
def kube(k8s_cluster):
    from tests.actuator.helpers import Kube

    api = k8s_cluster.api_client()
    yield Kube(api)
    api.close()


@pytest.fixture
def k8s_settings(k8s_namespace: str) -> Settings:
    """Settings whose mig-parted ConfigMap lives in this test's own namespace."""
    return make_settings(k8s_namespace)


@pytest.fixture
def gateway(k8s_cluster):
    from gpuledger.actuator.gateway import ClusterGateway, RetryPolicy

    with ClusterGateway(k8s_cluster.api_client(), retry=RetryPolicy(attempts=3, base_s=0.05)) as gw:
        yield gw


@pytest.fixture
def created_nodes(kube):
    """Names appended here are deleted after the test (Nodes are cluster-wide and shared)."""
    names: list[str] = []
    yield names
    kube.delete_nodes(names)


@pytest.fixture
def mig_manager(k8s_cluster, k8s_settings):
    from tools.mig_manager_emulator import MigBehavior, MigManagerEmulator

    api = k8s_cluster.api_client()
    emulator = MigManagerEmulator(api, k8s_settings.kubernetes, MigBehavior(delay_s=0.3)).start()
    yield emulator
    emulator.stop()
    api.close()
