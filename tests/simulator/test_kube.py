"""Kubernetes manifests and Kueue objects describe the same fleet as the frames.

Cases: Nodes carry GPU feature discovery labels and device-plugin capacity (MIG resources
count the instances alive at the instant; time-slice nodes multiply by replicas; HAMi nodes
offer only `nvidia.com/gpu` = cards x 10, never gpumem or gpucores, and carry the register
annotation naming their cards; HAMi pods name the card they got in the allocation annotation,
scheduled by `hami-scheduler`, with an amount the register's card memory makes the slot's
fraction); Namespaces carry `team` except the unlabeled ones; the Pods are
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
            assert {k for k in capacity if k.startswith("nvidia.com/")} == {"nvidia.com/gpu"}
            assert int(capacity["nvidia.com/gpu"]) == 10 * cards.height
            register = json.loads(node["metadata"]["annotations"]["hami.io/node-nvidia-register"])
            assert sorted(d["id"] for d in register) == sorted(cards["uuid"])
            assert {d["devmem"] for d in register} == {int(m) for m in cards["memory_mib"]}
            assert all(d.get("index", 0) == i for i, d in enumerate(register))
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
    hami_pods = []
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
        if "hami.io/vgpu-devices-allocated" in meta.get("annotations", {}):
            hami_pods.append(pod)
    assert hami_pods
    cards = dict(tiny_inventory["gpus"].select("uuid", "memory_mib").iter_rows())
    truth = tiny_sim.ground_truth().filter((pl.col("ts") == at.replace(minute=0)) & pl.col("pod").is_not_null())
    slot = {(ns, p): (u, share) for ns, p, u, share in truth.select("namespace", "pod", "uuid", "share").iter_rows()}
    forms = set()
    for pod in hami_pods:
        meta = pod["metadata"]
        assert pod["spec"]["schedulerName"] == "hami-scheduler"
        uuid, kind, mem, cores = meta["annotations"]["hami.io/vgpu-devices-allocated"].removesuffix(":;").split(",")
        want_uuid, share = slot[(meta["namespace"], meta["name"])]
        assert (uuid, kind) == (want_uuid, "NVIDIA")
        assert max(int(cores) / 100, int(mem) / cards[uuid]) == share
        forms.add(tuple(sorted(pod["spec"]["containers"][0]["resources"]["requests"])))
    assert {r for f in forms for r in f} == {"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
                                             "nvidia.com/gpucores"}


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
