"""The DRA object parser (`collectors.dra_objects`) on the shapes a live cluster also sends.

Cases:
- attributes are read with or without the driver's domain prefix, in each value kind;
- a claim generated from a ResourceClaimTemplate names its template (from the pod's spec and
  `status.resourceClaimStatuses`); a claim without an allocation is not billed; a `firstAvailable` sub-request gets its
  sub-request's DeviceClass; MPS and time-slicing in the claim's config are recognised, and a
  config for another request does not apply;
- a claim being deleted ends at its deletion time, never after the snapshot;
- a device that names no card (no UUID, no parent) is not a GPU we bill;
- planes: a node named by an NVIDIA GPU slice is `dra` (with `dynamic_mig` when a device
  consumes counters), a node with `nvidia.com/gpu` allocatable is `device-plugin`, a node with
  neither is not listed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gpuledger.collectors.dra_objects import attributes, claim_rows, device_rows, plane_rows, pod_claims

AT = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _claim(name: str, *, allocated: bool = True, config: list[dict[str, Any]] | None = None,
           requests: list[dict[str, Any]] | None = None, result_request: str = "gpu",
           deleted: datetime | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                            "creationTimestamp": "2026-03-01T10:00:00Z"}
    if deleted:
        meta["deletionTimestamp"] = deleted.strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"allocation": {"devices": {"results": [
        {"request": result_request, "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-0"}]}}}
    return {"metadata": meta, "spec": {"devices": {
        "requests": requests or [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
        "config": config or []}}, "status": status if allocated else {}}


def _sharing(strategy: str, requests: list[str]) -> list[dict[str, Any]]:
    return [{"requests": requests, "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "kind": "GpuConfig", "sharing": {"strategy": strategy}}}}]


def test_attributes_with_and_without_domain() -> None:
    device = {"attributes": {"gpu.nvidia.com/uuid": {"string": "GPU-1"}, "index": {"int": 3},
                             "migCapable": {"bool": True}, "driverVersion": {"version": "580.1.0"}}}
    assert attributes(device) == {"uuid": "GPU-1", "index": 3, "migCapable": True, "driverVersion": "580.1.0"}


def test_claims_allocation_class_and_sharing() -> None:
    claims = [
        _claim("pending", allocated=False),
        _claim("mps", config=_sharing("MPS", ["gpu"])),
        _claim("other-request", config=_sharing("TimeSlicing", ["nic"])),
        _claim("sub", requests=[{"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com"},
            {"name": "small", "deviceClassName": "mig.nvidia.com"}]}], result_request="gpu/small"),
    ]
    rows = {r["claim"]: r for r in claim_rows(claims, {}, AT)}
    assert set(rows) == {"mps", "other-request", "sub"}
    assert rows["mps"]["sharing"] == "mps"
    assert rows["other-request"]["sharing"] == "exclusive"
    assert rows["sub"]["device_class"] == "mig.nvidia.com"


def test_a_template_claim_names_its_template() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
           "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}]}}
    templates, users = pod_claims([pod])
    assert templates == {("ns", "p-gpu-x7k2"): "one-gpu"} and users[("ns", "p-gpu-x7k2")] == [pod]
    [row] = claim_rows([_claim("p-gpu-x7k2")], templates, AT)
    assert row["template"] == "one-gpu"


def test_a_claim_being_deleted_ends_at_its_deletion() -> None:
    deleted = AT - timedelta(minutes=17)
    since = AT - timedelta(minutes=30)  # the previous list
    [row] = claim_rows([_claim("gone", deleted=deleted)], {}, AT, since=since)
    assert row["start_ts"] == since and row["end_ts"] == deleted
    [late] = claim_rows([_claim("later", deleted=AT + timedelta(hours=1))], {}, AT)
    assert late["end_ts"] == AT


def _slice(node: str, devices: list[dict[str, Any]], driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {"spec": {"driver": driver, "nodeName": node, "pool": {"name": node}, "devices": devices}}


def test_devices_without_a_card_are_skipped() -> None:
    slices = [_slice("n", [
        {"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-0"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}}},
        {"name": "mystery", "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}}},
    ])]
    rows = device_rows(slices, AT)
    assert [r["device"] for r in rows] == ["gpu-0"]
    assert rows[0]["model"] == "H100-80GB" and rows[0]["placement"] == -1 and rows[0]["parent_uuid"] == "GPU-0"


def test_planes() -> None:
    dynamic = {"name": "m", "consumesCounters": [{"counterSet": "c", "counters": {}}], "attributes": {
        "type": {"string": "mig"}, "profile": {"string": "1g.10gb"}, "parentUUID": {"string": "GPU-9"},
        "memorySliceStart": {"int": 0}}}
    devices = device_rows([_slice("dra-1", [dynamic]), _slice("nic-1", [dynamic], driver="nic.example.com")], AT)
    nodes = [
        {"metadata": {"name": "dra-1"}, "status": {"allocatable": {}}},
        {"metadata": {"name": "plugin-1"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}},
        {"metadata": {"name": "cpu-1"}, "status": {"allocatable": {"cpu": "8"}}},
        {"metadata": {"name": "nic-1"}, "status": {"allocatable": {}}},
    ]
    planes = {r["node"]: (r["plane"], r["dynamic_mig"]) for r in plane_rows(nodes, devices, AT)}
    assert planes == {"dra-1": ("dra", 1), "plugin-1": ("device-plugin", 0)}
