"""The twin's per-flavor Kueue objects, without a cluster: their shape by hand, and each object
validated against the OpenAPI schema of Kueue v0.17.0's own CRDs (the files the test environment
installs), with no field the schema does not know (the apiserver would silently prune one).

Case: ClusterQueue `ml` lists h100 (4 GPUs, may borrow 2), then a100 (2 GPUs), then a100-mig with
two MIG profiles (mixed strategy: `nvidia.com/mig-1g.10gb` 14, `nvidia.com/mig-3g.40gb` 4). Kueue
wants flavors covering the same resources in one group: [gpu] -> h100, a100 in that order (the
order Kueue tries them); [mig-1g.10gb, mig-3g.40gb] -> a100-mig.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tools.k8s_testenv.builder import build
from tools.k8s_testenv.crds import load_crds
from tools.k8s_testenv.versions import Layout, default_cache_root
from tools.twin.flavors import Flavor, FlavorQuota, flavor_node, node_names, resource_flavor
from tools.twin.harness import GPU
from tools.twin.replay import QueueSpec, Window, WorkloadSpec, cluster_queue, job_manifest
from tools.twin_build.builder import TwinBuildError

MIG1, MIG3 = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
POOL = "gpuledger.io/pool"
FLAVORS = (
    Flavor("h100", {POOL: "h100"}, ({GPU: 8}, {GPU: 8})),
    Flavor("a100", {POOL: "a100"}, ({GPU: 4},)),
    Flavor("a100-mig", {POOL: "a100-mig"}, ({MIG1: 14, MIG3: 4},)),
)
QUEUE = QueueSpec("ml", 6, cohort="lab", quotas=(
    FlavorQuota("h100", GPU, 4, borrowing_limit=2), FlavorQuota("a100", GPU, 2),
    FlavorQuota("a100-mig", MIG1, 14), FlavorQuota("a100-mig", MIG3, 4)))


def _schemas() -> dict[str, dict[str, Any]]:
    """kind -> the openAPIV3Schema of the version the twin speaks (v1beta2), from the Kueue CRDs the
    test environment's build fetches (built here when absent, never skipped)."""
    layout = Layout(default_cache_root())
    build(layout, echo=lambda line: print(line, file=sys.stderr))
    out = {}
    for crd in load_crds(layout.crds):
        for version in crd["spec"]["versions"]:
            if version["name"] == "v1beta2":
                out[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def _unknown_fields(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    """Paths in `value` that `schema` (structural: properties / items) does not declare."""
    if isinstance(value, dict) and "properties" in schema:
        out = []
        for key, item in value.items():
            if key not in schema["properties"]:
                out.append(f"{where}.{key}")
            else:
                out += _unknown_fields(item, schema["properties"][key], f"{where}.{key}")
        return out
    if isinstance(value, list) and "items" in schema:
        return [p for i, item in enumerate(value) for p in _unknown_fields(item, schema["items"], f"{where}[{i}]")]
    return []


def test_cluster_queue_groups_flavors_by_covered_resources_in_listed_order() -> None:
    spec = cluster_queue(QUEUE, "unused")["spec"]
    assert spec["cohortName"] == "lab" and "flavorFungibility" not in spec  # Kueue's defaults
    assert spec["resourceGroups"] == [
        {"coveredResources": [GPU], "flavors": [
            {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4, "borrowingLimit": 2}]},
            {"name": "a100", "resources": [{"name": GPU, "nominalQuota": 2}]}]},
        {"coveredResources": [MIG1, MIG3], "flavors": [
            {"name": "a100-mig", "resources": [{"name": MIG1, "nominalQuota": 14}, {"name": MIG3, "nominalQuota": 4}]}]},
    ]
    # A queue without quotas keeps the one-flavor twin of decision 0234.
    legacy = cluster_queue(QueueSpec("a", 2, lending_limit=1), "twin-gpu-x")["spec"]["resourceGroups"]
    assert legacy == [{"coveredResources": [GPU], "flavors": [
        {"name": "twin-gpu-x", "resources": [{"name": GPU, "nominalQuota": 2, "lendingLimit": 1}]}]}]


def test_nodes_carry_the_flavors_labels_and_device_plugin_resources() -> None:
    nodes = node_names("ns1", FLAVORS)
    assert [(name, f.name) for name, f, _ in nodes] == [
        ("twin-ns1-f0n0", "h100"), ("twin-ns1-f0n1", "h100"), ("twin-ns1-f1n0", "a100"), ("twin-ns1-f2n0", "a100-mig")]
    node = flavor_node(*nodes[3])
    assert node["metadata"]["labels"][POOL] == "a100-mig"
    assert node["status"]["allocatable"][MIG1] == "14" and node["status"]["allocatable"][MIG3] == "4"
    assert GPU not in node["status"]["allocatable"]  # a MIG node advertises its instances only
    assert resource_flavor(FLAVORS[2])["spec"] == {"nodeLabels": {POOL: "a100-mig"}}


def test_a_pinned_job_selects_its_flavors_nodes_and_asks_its_resource() -> None:
    w = WorkloadSpec("j", 0, 2, "ml", 3, resource=MIG1, flavor="a100-mig")
    pod = job_manifest(w, 10.0, dict(FLAVORS[2].node_labels))["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {POOL: "a100-mig"}
    assert pod["containers"][0]["resources"]["limits"] == {MIG1: "2"}
    assert "nodeSelector" not in job_manifest(WorkloadSpec("k", 0, 1, "ml", 3), 10.0)["spec"]["template"]["spec"]


def test_objects_validate_against_kueues_crd_schemas() -> None:
    import jsonschema

    schemas = _schemas()
    objects = [cluster_queue(QUEUE, "unused"), *(resource_flavor(f) for f in FLAVORS)]
    for obj in objects:
        schema = schemas[obj["kind"]]
        jsonschema.validate(obj, schema)
        assert _unknown_fields(obj, schema, obj["kind"]) == []
    # The check can fail: a misplaced field and a wrong type are caught.
    bad = cluster_queue(QUEUE, "unused")
    bad["spec"]["resourceGroups"][0]["flavors"][0]["nodeLabels"] = {}
    assert _unknown_fields(bad, schemas["ClusterQueue"], "cq") == ["cq.spec.resourceGroups[0].flavors[0].nodeLabels"]
    bad["spec"]["resourceGroups"][0]["coveredResources"] = "nvidia.com/gpu"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schemas["ClusterQueue"])


def test_a_window_naming_an_unknown_flavor_or_uncovered_resource_is_one_line() -> None:
    ok = Window((QUEUE,), (), (WorkloadSpec("j", 0, 1, "ml", 1),), FLAVORS)
    ok.check()
    for workload, message in ((WorkloadSpec("j", 0, 1, "ml", 1, flavor="l4"), "unknown flavor 'l4'"),
                              (WorkloadSpec("j", 0, 1, "ml", 1, resource="nvidia.com/mig-7g.80gb"), "no quota of")):
        with pytest.raises(TwinBuildError, match=message) as caught:
            Window((QUEUE,), (), (workload,), FLAVORS).check()
        assert "\n" not in str(caught.value)
    with pytest.raises(TwinBuildError, match="unknown flavor"):
        Window((QUEUE,), (), (), FLAVORS[:1]).check()

