"""Kubernetes manifests and Kueue objects describe the same fleet as the frames.

Cases: Nodes carry GPU feature discovery labels and device-plugin capacity (MIG resources
count the instances alive at the instant; time-slice nodes multiply by replicas; HAMi nodes
offer gpumem and gpucores); Namespaces carry `team` except the unlabeled ones; the Pods are
exactly the ones running at the instant, on their nodes, with requests equal to limits, owner
references and Kueue queue labels on batch work; every LocalQueue points at an existing
ClusterQueue whose flavors cover the resources pods request.
"""

from __future__ import annotations

import json
from collections import Counter

import polars as pl

from gpuledger.simulator.tenants import LOCAL_QUEUES


def _by_kind(items):
    out: dict[str, list[dict]] = {}
    for item in items:
        out.setdefault(item["kind"], []).append(item)
    return out


def test_nodes(tiny_sim, tiny_inventory):
    kinds = _by_kind(tiny_sim.kube_manifests())
    nodes = {n["metadata"]["name"]: n for n in kinds["Node"]}
    gpus = tiny_inventory["gpus"]
    mig = tiny_inventory["mig_instances"].filter(pl.col("end_ts") >= tiny_sim.window.end)
    for row in tiny_inventory["nodes"].iter_rows(named=True):
        node = nodes[row["node"]]
        labels, capacity = node["metadata"]["labels"], node["status"]["capacity"]
        assert labels["nvidia.com/gpu.count"] == str(row["gpu_count"])
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        assert json.loads(row["labels"]) == labels
        cards = gpus.filter(pl.col("node") == row["node"])
        if row["sharing_mode"] == "mig":
            on_node = mig.join(cards.select("uuid"), on="uuid")
            want = Counter(f"nvidia.com/mig-{p}" for p in on_node["profile"])
            assert {k: int(v) for k, v in capacity.items() if "mig-" in k} == dict(want)
            assert labels["nvidia.com/mig.config.state"] == "success"
        elif row["sharing_mode"] == "timeslice":
            assert int(capacity["nvidia.com/gpu"]) == cards.height * row["replicas"]
            assert labels["nvidia.com/gpu.replicas"] == str(row["replicas"])
            assert labels["nvidia.com/gpu.product"].endswith("-SHARED")
        elif row["sharing_mode"] == "vgpu":
            assert int(capacity["nvidia.com/gpucores"]) == 100 * cards.height
            assert int(capacity["nvidia.com/gpumem"]) == int(cards["memory_mib"].sum())
        else:
            assert int(capacity["nvidia.com/gpu"]) == cards.height


def test_namespaces(tiny_sim):
    namespaces = _by_kind(tiny_sim.kube_manifests())["Namespace"]
    teams = [n["metadata"]["labels"].get("team") for n in namespaces if n["metadata"]["name"] != "gpu-operator"]
    assert len({t for t in teams if t}) >= 10
    assert 0 < teams.count(None) < len(teams) / 4


def test_pods_running_at_the_instant(tiny_sim, tiny_inventory):
    at = tiny_sim.window.start.replace(hour=13)
    pods = _by_kind(tiny_sim.kube_manifests(at))["Pod"]
    inv = tiny_inventory["pods"].filter((pl.col("start_ts") <= at) & (pl.col("end_ts") > at))
    assert {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods} == set(
        inv.select("namespace", "pod").iter_rows()
    )
    nodes = dict(inv.select("pod", "node").iter_rows())
    for pod in pods:
        meta, spec = pod["metadata"], pod["spec"]
        assert spec["nodeName"] == nodes[meta["name"]]
        resources = spec["containers"][0]["resources"]
        assert resources["requests"] == resources["limits"] and resources["requests"]
        assert meta["ownerReferences"][0]["controller"] is True
        queue = meta["labels"].get("kueue.x-k8s.io/queue-name")
        assert queue in (None, *LOCAL_QUEUES)
        if meta["ownerReferences"][0]["kind"] == "Job":
            assert queue in LOCAL_QUEUES


def test_kueue_objects(tiny_sim, tiny_inventory):
    kinds = _by_kind(tiny_sim.kueue_manifests())
    assert all(o["apiVersion"] == "kueue.x-k8s.io/v1beta2" for objs in kinds.values() for o in objs)
    cqs = {o["metadata"]["name"]: o for o in kinds["ClusterQueue"]}
    flavors = {o["metadata"]["name"] for o in kinds["ResourceFlavor"]}
    for lq in kinds["LocalQueue"]:
        assert lq["spec"]["clusterQueue"] in cqs
    covered = set()
    for cq in cqs.values():
        for group in cq["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
                covered |= {(flavor["name"], r) for r in group["coveredResources"]}
    pods = tiny_inventory["pods"].filter(pl.col("queue").is_not_null()).join(
        tiny_inventory["nodes"].select("node", "pool"), on="node"
    )
    for pool, req in pods.select("pool", "gpu_requests").iter_rows():
        for resource in json.loads(req):
            if resource == "nvidia.com/gpu" or resource.startswith("nvidia.com/mig-"):
                assert (pool, resource) in covered
    queues = tiny_inventory["queues"]
    # plus the Volcano pool's Queues and PodGroups (simulator.volcano)
    assert set(queues["kind"]) == {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Queue", "PodGroup"}
