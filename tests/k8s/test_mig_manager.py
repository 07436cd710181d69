"""The MIG Manager emulator follows the GPU Operator's label protocol against the real API.

Cases (no cluster): `plan_node` turns mig-parted entries into per-device shapes and extended
resources (hand-computed), and rejects layouts the placement rules forbid (two 4g on one GPU),
devices that do not exist, a device selected twice, a model without MIG facts, and a document
without `version: v1`.

Cases (real kube-apiserver):
- setting `nvidia.com/mig.config` drives `pending` → `success` (asserted on the emulator's
  recorded history, never by polling for the transient `pending`); capacity and allocatable
  become the new MIG counts and a later config removes stale `nvidia.com/mig-*` resources;
- the history records `pending` even with no delay at all, when it lasts milliseconds;
- an invalid layout, an unknown config name, and an injected failure end `failed` and leave
  capacity untouched;
- "stays pending forever" keeps `pending` long after the delay;
- an emulator limited to other node names never touches this node;
- `stop()` ends the watch thread.
"""

from __future__ import annotations

import time
import uuid

import pytest
import yaml
from kubernetes import client

from gpuledger.core.config import KubernetesSettings
from gpuledger.core.errors import InputError
from tools.kube_loader import load_manifests
from tools.mig_manager_emulator import (
    CONFIG_LABEL,
    STATE_LABEL,
    MigBehavior,
    MigManagerEmulator,
    parse_mig_parted,
    plan_node,
)

H100 = "NVIDIA-H100-80GB-HBM3"
TERMINAL = ("success", "failed")
MIG_PARTED = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-3g.40gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
        "mixed": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"devices": [1], "mig-enabled": False},
        ],
        "invalid-4g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}],
    },
}
CONFIGS = MIG_PARTED["mig-configs"]


# --- pure ---------------------------------------------------------------------------------


def test_plan_node_counts_by_hand():
    result = plan_node(CONFIGS["all-3g.40gb"], "all-3g.40gb", H100, 2)
    assert result.resources == {"nvidia.com/mig-3g.40gb": 4, "nvidia.com/gpu": 0}
    assert result.devices == ((("3g.40gb", 2),), (("3g.40gb", 2),))
    mixed = plan_node(CONFIGS["mixed"], "mixed", H100, 2)
    assert mixed.resources == {"nvidia.com/mig-1g.10gb": 7, "nvidia.com/gpu": 1}
    assert mixed.devices == ((("1g.10gb", 7),), None)
    assert plan_node(CONFIGS["all-disabled"], "all-disabled", "Tesla-T4", 4).resources == {"nvidia.com/gpu": 4}


@pytest.mark.parametrize(("entries", "product", "count", "needle"), [
    (CONFIGS["invalid-4g"], H100, 1, "cannot be placed"),
    ([{"devices": [2], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}], H100, 2, "do not exist"),
    ([{"devices": "all", "mig-enabled": False}, {"devices": [0], "mig-enabled": False}], H100, 2, "twice"),
    (CONFIGS["all-3g.40gb"], "Tesla-T4", 1, "no MIG facts"),
    ([{"devices": "some", "mig-enabled": False}], H100, 1, "`devices`"),
])
def test_plan_node_rejects(entries, product, count, needle):
    with pytest.raises(InputError, match=needle):
        plan_node(entries, "c", product, count)


def test_parse_requires_version_v1():
    with pytest.raises(InputError, match="version: v1"):
        parse_mig_parted("mig-configs: {}\n", "cm")
    assert set(parse_mig_parted(yaml.safe_dump(MIG_PARTED), "cm")) == set(CONFIGS)


# --- against the API ------------------------------------------------------------------------


@pytest.fixture
def mig_env(k8s_cluster, k8s_namespace):
    """A mig-parted ConfigMap in a fresh namespace and a 2-GPU H100 node; yields (api, settings, node)."""
    settings = KubernetesSettings(mig_configmap_namespace=k8s_namespace, mig_configmap_name="mig-parted")
    node = f"gpu-{uuid.uuid4().hex[:8]}"
    api = k8s_cluster.api_client()
    load_manifests(api, [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig-parted", "namespace": k8s_namespace},
         "data": {"config.yaml": yaml.safe_dump(MIG_PARTED)}},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": node, "labels": {"nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "2",
                                               "nvidia.com/mig.strategy": "mixed"}},
         "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": "2"},
                    "allocatable": {"cpu": "63", "nvidia.com/gpu": "2"}}},
    ])
    yield api, settings, node
    api.close()


def set_config(api, node: str, config: str) -> None:
    client.CoreV1Api(api).patch_node(node, {"metadata": {"labels": {CONFIG_LABEL: config}}},
                                     _content_type="application/merge-patch+json")


def gpu_resources(api, node: str) -> tuple[dict[str, str], dict[str, str]]:
    status = client.CoreV1Api(api).read_node(node).status
    keep = lambda d: {k: v for k, v in (d or {}).items() if k.startswith("nvidia.com/")}  # noqa: E731
    return keep(status.capacity), keep(status.allocatable)


def test_label_change_drives_pending_then_success(mig_env):
    api, settings, node = mig_env
    with MigManagerEmulator(api, settings, MigBehavior(delay_s=0.5), nodes=frozenset({node})) as mig:
        set_config(api, node, "all-3g.40gb")
        assert mig.wait_for_transition(node, TERMINAL, timeout_s=20).state == "success"
        capacity, allocatable = gpu_resources(api, node)
        assert capacity == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "4"}
        assert allocatable == capacity
        # A second config replaces the first: the 3g resource disappears.
        mark = mig.mark(node)
        set_config(api, node, "mixed")
        assert mig.wait_for_transition(node, TERMINAL, after=mark, timeout_s=20).state == "success"
        capacity, allocatable = gpu_resources(api, node)
        assert capacity == {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "7"}
        assert allocatable == capacity
        history = mig.history(node)
        assert [(t.config, t.state) for t in history] == [
            ("all-3g.40gb", "pending"), ("all-3g.40gb", "success"), ("mixed", "pending"), ("mixed", "success"),
        ]
        # The configured delay is spent pending; the record's timestamps show it.
        assert history[1].at - history[0].at >= 0.5 and history[3].at - history[2].at >= 0.5
        # The node's other resources are untouched.
        assert client.CoreV1Api(api).read_node(node).status.capacity["cpu"] == "64"


def test_history_keeps_a_pending_that_lasts_milliseconds(mig_env):
    api, settings, node = mig_env
    with MigManagerEmulator(api, settings, MigBehavior(delay_s=0.0), nodes=frozenset({node})) as mig:
        set_config(api, node, "mixed")
        done = mig.wait_for_transition(node, TERMINAL, timeout_s=20)
        pending = mig.wait_for_transition(node, "pending", timeout_s=0)
    assert done.state == "success" and pending.at <= done.at
    assert [t.state for t in mig.history(node)] == ["pending", "success"]
    with pytest.raises(TimeoutError, match=r"written since mark 2: \[\]"):
        mig.wait_for_transition(node, "pending", after=2, timeout_s=0.2)


@pytest.mark.parametrize("config", ["invalid-4g", "no-such-config"])
def test_invalid_or_unknown_config_fails(mig_env, config):
    api, settings, node = mig_env
    before = gpu_resources(api, node)
    with MigManagerEmulator(api, settings, nodes=frozenset({node})) as mig:
        set_config(api, node, config)
        assert mig.wait_for_transition(node, TERMINAL, timeout_s=20).state == "failed"
    assert gpu_resources(api, node) == before
    assert node in mig.errors


def test_injected_failure_and_pending_forever(mig_env):
    api, settings, node = mig_env
    with MigManagerEmulator(api, settings, MigBehavior(fail_nodes=frozenset({node})), nodes=frozenset({node})) as mig:
        set_config(api, node, "all-3g.40gb")
        failed = mig.wait_for_transition(node, TERMINAL, timeout_s=20)
        assert failed.state == "failed" and "injected" in failed.reason
        assert "injected" in mig.errors[node]
        mig.behavior = MigBehavior(delay_s=0.2, pending_forever_configs=frozenset({"mixed"}))
        mark = mig.mark(node)
        set_config(api, node, "mixed")
        assert mig.wait_for_transition(node, "pending", after=mark, timeout_s=10).config == "mixed"
        time.sleep(1.5)  # far past the delay: a real controller would have finished by now
        labels = client.CoreV1Api(api).read_node(node).metadata.labels
        assert labels[STATE_LABEL] == "pending"
        assert [t.state for t in mig.history(node)[mark:]] == ["pending"]
    assert gpu_resources(api, node)[0] == {"nvidia.com/gpu": "2"}


def test_node_filter_leaves_other_nodes_alone(mig_env):
    api, settings, node = mig_env
    with MigManagerEmulator(api, settings, nodes=frozenset({"some-other-node"})) as mig:
        set_config(api, node, "all-3g.40gb")
        time.sleep(1.0)  # an absence has no event to wait for: give a reconcile time to happen
        labels = client.CoreV1Api(api).read_node(node).metadata.labels
    assert STATE_LABEL not in labels
    assert mig.history(node) == []


def test_stop_ends_the_watch_thread(k8s_cluster):
    with k8s_cluster.api_client() as api:
        mig = MigManagerEmulator(api).start()
        watcher = mig._watcher
        assert watcher is not None and watcher.is_alive()
        mig.stop()
        assert not watcher.is_alive()
