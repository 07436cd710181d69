"""DRA against the real kube-apiserver (resource.k8s.io/v1, served by 1.37 without extra flags).

Cases:
- the simulator's DRA pool at minute 150 (DeviceClasses, ResourceSlices, claims with their
  allocation and reservedFor written through the status subresource, pods with
  resourceClaimStatuses) is listed in pages of 2 and joined: every allocated claim with its
  device's parent card, profile and placement, its device class, time-slicing recognised on the
  shared claim, each pod that reserves a claim, and the DRA nodes recorded on the DRA plane;
- a claim created, allocated and released (deleted behind a finalizer) is billed exactly for the
  time between the server's own creation and deletion timestamps;
- the plane guard: writing the MIG Manager label is refused on a DRA node (its labels and
  resourceVersion untouched), and goes through on a device-plugin node of the same fleet.
"""

from __future__ import annotations

import json
import time
import types
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest
from kubernetes import client

from gpuledger.actuator.dra_plane import DraPlaneError
from gpuledger.actuator.gateway import ClusterGateway
from gpuledger.actuator.mig_node_ops import NodeTarget, set_label
from gpuledger.actuator.rollout_progress import NodeProgress
from gpuledger.analytics.billing.bill import compute_bill
from gpuledger.collectors.dra import frames_from_history, frames_from_objects
from gpuledger.collectors.kubernetes import KubernetesCollector
from gpuledger.core.config import Settings
from gpuledger.core.window import HOUR, Window, floor_time
from gpuledger.simulator.dra import CARDS, CLAIMS, DraPool
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.store import LoadBatch

pytestmark = pytest.mark.k8s
MINUTE = 150
POOL = DraPool(datetime(2026, 3, 1, tzinfo=UTC))


def _create(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def _load_pool(api: client.ApiClient) -> None:
    core, res = client.CoreV1Api(api), client.ResourceV1Api(api)
    for node in POOL.node_objects():
        _create(core.create_node, node)
    for ns in {c.namespace for c in CLAIMS}:
        _create(core.create_namespace, {"metadata": {"name": ns}})
    for cls in POOL.device_classes():
        _create(res.create_device_class, cls)
    for item in POOL.slices():
        _create(res.create_resource_slice, item)
    for claim in CLAIMS:
        obj = POOL.claim_object(claim, MINUTE)
        if obj is None or "deletionTimestamp" in obj["metadata"]:
            continue
        meta = {k: obj["metadata"][k] for k in ("name", "namespace")}
        _create(res.create_namespaced_resource_claim, meta["namespace"], {"metadata": meta, "spec": obj["spec"]})
    for pod in POOL.pod_objects(MINUTE):
        meta = {k: pod["metadata"][k] for k in ("name", "namespace")}
        _create(core.create_namespaced_pod, meta["namespace"], {"metadata": meta, "spec": pod["spec"]})
        core.patch_namespaced_pod_status(meta["name"], meta["namespace"], {"status": pod["status"]})
    for claim in CLAIMS:
        obj = POOL.claim_object(claim, MINUTE)
        if obj is None or "deletionTimestamp" in obj["metadata"]:
            continue
        status = obj["status"]
        for ref in status["reservedFor"]:  # the live pods' uids
            ref["uid"] = core.read_namespaced_pod(ref["name"], claim.namespace).metadata.uid
        res.patch_namespaced_resource_claim_status(claim.name, claim.namespace, {"status": status})


@pytest.fixture(scope="module")
def listed(k8s_cluster: Any) -> dict[str, pl.DataFrame]:
    with k8s_cluster.api_client() as api:
        _load_pool(api)
        kube = KubernetesCollector(api, Settings(), page_size=2)
        return frames_from_objects(kube.dra_objects(), datetime.now(UTC))


def _live(minute: int) -> list[Any]:
    return [c for c in CLAIMS if c.start <= minute < c.end]


def test_claims_are_listed_with_their_devices(listed: dict[str, pl.DataFrame]) -> None:
    claims = listed["dra_claims"].join(listed["dra_devices"], on=["driver", "pool", "device"], how="left")
    got = {r["claim"]: r for r in claims.iter_rows(named=True)}
    assert sorted(got) == sorted(c.name for c in _live(MINUTE))
    for plan in _live(MINUTE):
        row = got[plan.name]
        assert row["parent_uuid"] == plan.card.uuid, plan.name
        assert row["profile"] == plan.profile and row["placement"] == plan.placement
        assert row["device_class"] == plan.device_class and row["namespace"] == plan.namespace
        assert row["sharing"] == ("timeslicing" if plan.sharing == "timeslicing" else "exclusive")


def test_pods_join_their_claims(listed: dict[str, pl.DataFrame]) -> None:
    uid = dict(zip(listed["dra_claims"]["claim_uid"], listed["dra_claims"]["claim"], strict=True))
    pairs = {(uid[u], p) for u, p in listed["dra_reservations"].select("claim_uid", "pod").iter_rows()}
    expected = {(c.name, p.name) for c in _live(MINUTE) for p in c.pods if p.start <= MINUTE <= p.end}
    assert pairs == expected
    assert ("shared-c", "c-serve-1") in pairs and ("shared-c", "c-serve-0") in pairs


def test_dra_nodes_are_on_the_dra_plane(listed: dict[str, pl.DataFrame]) -> None:
    planes = dict(zip(listed["node_planes"]["node"], listed["node_planes"]["plane"], strict=True))
    assert {planes[n] for n in ("dra-node-0", "dra-node-1", "dra-node-2")} == {"dra"}
    cards = listed["gpus"]
    assert set(cards["uuid"]) == {c.uuid for c in CARDS}
    assert set(cards["sharing_mode"]) == {"dra"}


def _short_claim(api: client.ApiClient, ns: str) -> dict[str, Any]:
    res = client.ResourceV1Api(api)
    body = {"metadata": {"name": "short", "namespace": ns, "finalizers": ["gpuledger.io/test-hold"]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    res.create_namespaced_resource_claim(ns, body)
    status = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-node-0", "device": "gpu-0"}]}}}
    res.patch_namespaced_resource_claim_status("short", ns, {"status": status})
    return json.loads(res.read_namespaced_resource_claim("short", ns, _preload_content=False).data)


def test_a_short_claim_is_billed_for_exactly_its_time(k8s_cluster: Any, k8s_namespace: str, tmp_path: Any) -> None:
    with k8s_cluster.api_client() as api:
        _load_pool(api)
        res = client.ResourceV1Api(api)
        created = _short_claim(api, k8s_namespace)
        kube = KubernetesCollector(api, Settings())
        seen = kube.dra_objects()
        first = datetime.now(UTC)
        # The server stamps whole seconds: let some pass so the claim holds its device a while.
        time.sleep(2.2)
        res.delete_namespaced_resource_claim("short", k8s_namespace)
        gone = json.loads(res.read_namespaced_resource_claim("short", k8s_namespace, _preload_content=False).data)
        released = kube.dra_objects()
        last = datetime.now(UTC)
        res.patch_namespaced_resource_claim("short", k8s_namespace, {"metadata": {"finalizers": None}})
    # No allocationTimestamp and no consumer: the claim is held from the first list that saw it
    # allocated (`first`, the history's first entry), never from its creation (decision 0164).
    created_at = datetime.fromisoformat(created["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    start = max(first, created_at)
    end = datetime.fromisoformat(gone["metadata"]["deletionTimestamp"].replace("Z", "+00:00"))
    frames = frames_from_history([(first, seen), (last, released)])
    window = Window(floor_time(start, HOUR), floor_time(start, HOUR) + 2 * HOUR)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.load(LoadBatch(frames=frames))
        bill = compute_bill(wh, window, Settings(), by=("namespace",), source="raw")
    line = bill.lines.filter(pl.col("namespace") == k8s_namespace)
    assert line.height == 1
    assert line["card_hours"][0] == pytest.approx((end - start) / timedelta(hours=1), abs=1e-9)
    assert end > start


def test_mig_label_is_never_written_to_a_dra_node(k8s_cluster: Any) -> None:
    with k8s_cluster.api_client() as api:
        _load_pool(api)
        core = client.CoreV1Api(api)
        _create(core.create_node, {"metadata": {"name": "plugin-node-0", "labels": {"nvidia.com/mig.config": "all-disabled"}}})
        before = core.read_node("dra-node-2")
        gateway = ClusterGateway(api)
        ctx: Any = types.SimpleNamespace(gateway=gateway, record=lambda *a, **k: None)
        target = NodeTarget(node="dra-node-2", target="all-1g.10gb", entry=None)
        with pytest.raises(DraPlaneError, match="DRA plane"):
            set_label(ctx, target, NodeProgress(node="dra-node-2"))
        after = core.read_node("dra-node-2")
        assert after.metadata.labels == before.metadata.labels
        assert after.metadata.resource_version == before.metadata.resource_version
        plugin = NodeTarget(node="plugin-node-0", target="all-1g.10gb", entry=None)
        set_label(ctx, plugin, NodeProgress(node="plugin-node-0", before_mig_config="all-disabled"))
        assert core.read_node("plugin-node-0").metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"
