"""The simulator's fleet loads into the real cluster, and the MIG emulator agrees with it.

Cases:
- every manifest of `Simulation.kube_manifests()` (Namespaces, the mig-parted ConfigMap, Nodes,
  Pods) and of `kueue_manifests()` (ResourceFlavors, ClusterQueues, LocalQueues, validated by
  the real Kueue CRDs) exists after `load_manifests`; Pods keep their simulated phase and Nodes
  their simulated GPU capacity (objects another test loaded first are skipped, not duplicated);
- cross-check: a copy of the simulator's MIG node, driven by the emulator from `all-disabled`
  back to its simulated config, ends with exactly the `nvidia.com/*` capacity the simulator
  computed for it (two independent computations of the same layout);
- on the way it goes `pending` then `success`, by two witnesses that cannot miss a state however
  briefly it lasted (no delay is configured, so `pending` lasts milliseconds): the emulator's
  recorded history of the states it wrote (in order, timestamps not decreasing) and a watch on
  the node started before the label changed (every stored value, in etcd order, at the same
  resourceVersions the emulator's writes returned).
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime

import pytest
import yaml
from kubernetes import client, dynamic

from gpuledger.core.config import KubernetesSettings
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.fleet import FleetSpec
from tools.kube_loader import load_manifests
from tools.mig_manager_emulator import CONFIG_LABEL, STATE_LABEL, MigManagerEmulator
from tools.node_label_watch import NodeLabelWatch

pytestmark = pytest.mark.k8s


@pytest.fixture(scope="module")
def sim():
    window = Window(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
    return Simulation(FleetSpec.default(gpus=16), window, seed=7)


def gpu_capacity(capacity: dict | None) -> dict[str, str]:
    return {k: v for k, v in (capacity or {}).items() if k.startswith("nvidia.com/")}


def test_fleet_loads_with_status(k8s_cluster, sim):
    manifests = sim.kube_manifests() + sim.kueue_manifests()
    with k8s_cluster.api_client() as api:
        report = load_manifests(api, manifests)
        assert sum(report.created.values()) + sum(report.skipped.values()) == len(manifests)
        dyn = dynamic.DynamicClient(api)
        for m in manifests:
            meta = m["metadata"]
            resource = dyn.resources.get(api_version=m["apiVersion"], kind=m["kind"])
            live = resource.get(name=meta["name"], namespace=meta.get("namespace"))
            if m["kind"] == "Pod":
                assert live.status.phase == m["status"]["phase"], meta["name"]
                assert live.spec.nodeName == m["spec"]["nodeName"]
            if m["kind"] == "Node" and meta["labels"].get(STATE_LABEL) == "success":
                assert gpu_capacity(live.status.capacity.to_dict()) == gpu_capacity(m["status"]["capacity"])


def test_emulator_reproduces_simulated_mig_capacity(k8s_cluster, k8s_namespace, sim):
    manifests = sim.kube_manifests()
    cm = next(m for m in manifests if m["kind"] == "ConfigMap")
    mig_nodes = [m for m in manifests if m["kind"] == "Node"
                 and any(k.startswith("nvidia.com/mig-") for k in m["status"]["capacity"])]
    assert mig_nodes, "the default fleet has a MIG pool"
    original = mig_nodes[0]
    config = original["metadata"]["labels"][CONFIG_LABEL]
    assert config in yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]
    # A private copy of node and ConfigMap: other tests may drive the simulator's own objects.
    node = copy.deepcopy(original)
    node["metadata"]["name"] = name = f"{original['metadata']['name']}-{uuid.uuid4().hex[:6]}"
    node["metadata"]["labels"][CONFIG_LABEL] = "all-disabled"
    node["metadata"]["labels"].pop(STATE_LABEL)
    cm_copy = copy.deepcopy(cm)
    cm_copy["metadata"] = {"name": "mig-parted", "namespace": k8s_namespace}
    settings = KubernetesSettings(mig_configmap_namespace=k8s_namespace, mig_configmap_name="mig-parted")
    gpus = original["metadata"]["labels"]["nvidia.com/gpu.count"]
    with k8s_cluster.api_client() as api:
        load_manifests(api, [cm_copy, node], on_exists="error")
        core = client.CoreV1Api(api)
        with MigManagerEmulator(api, settings, nodes=frozenset({name})) as mig:
            assert mig.wait_for_transition(name, ["success", "failed"], timeout_s=20).state == "success"
            assert gpu_capacity(core.read_node(name).status.capacity) == {"nvidia.com/gpu": gpus}
            mark = mig.mark(name)
            with NodeLabelWatch(api, name, STATE_LABEL) as seen:
                core.patch_node(name, {"metadata": {"labels": {CONFIG_LABEL: config}}},
                                _content_type="application/merge-patch+json")
                done = mig.wait_for_transition(name, ["success", "failed"], after=mark, timeout_s=20)
                assert done.state == "success", done.reason
                stored = seen.wait_for("success", after=1, timeout_s=20)
            written = mig.history(name)[mark:]
        assert [(t.config, t.state) for t in written] == [(config, "pending"), (config, "success")]
        assert written[0].at <= written[1].at
        # The API server stored `pending` in between, at the version the emulator's write returned.
        assert seen.sequence() == ["success", "pending", "success"]
        assert [v.resource_version for v in seen.values[1:]] == [t.resource_version for t in written]
        assert stored.resource_version == written[1].resource_version
        live = core.read_node(name).status
        assert gpu_capacity(live.capacity) == gpu_capacity(original["status"]["capacity"])
        assert gpu_capacity(live.allocatable) == gpu_capacity(original["status"]["capacity"])
