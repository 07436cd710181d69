"""A DRA GPU pool: whole-GPU claims, static MIG claims, dynamic MIG claims created and destroyed
during the day, one shared (time-sliced) claim, with their ResourceSlices, claims, pods,
`dra_*`-labelled dcgm series and ground truth.

Why its own generator: a DRA pod requests no `nvidia.com/gpu`, and a dynamic MIG device may have
no series at all, so the pool must produce the API objects (what the claims hold) and the
telemetry (what was idle) separately, and the truth from the plan of the day itself, never from
the billing rule under test. The plan is `CLAIMS` below, in minutes from the window's start.

Truth (`truth()`): card-hours per team = sum over claims of device share (whole 1, MIG compute
slices / 7) x minutes held / 60, a shared claim split evenly among the pods reserving it;
idle card-hours = the same for the minutes a pod's series shows activity 0 in its idle block
(`IDLE_MINUTES` long), where the part of the block its series shows is at least 30 minutes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DRIVER = "gpu.nvidia.com"
BLOCK_MINUTES = 360
"""The plan's length: `CLAIMS` fit in these minutes (`simulator.dra_fleet` repeats it)."""
IDLE_MINUTES = 40
IDLE_RUN_MINUTES = 30
"""An idle run is idle time from this length on (the default `idle.min_minutes`)."""
BUSY = 0.7
COMPUTE_SLICES = 7
MODEL = "H100-80GB"
PRODUCT = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Card:
    node: str
    index: int
    dynamic: bool  # MIG devices created on demand (partitionable) vs whole/static
    static_mig: tuple[tuple[str, int], ...] = ()  # (profile, placement) pre-created

    @property
    def uuid(self) -> str:
        return _uuid(f"{self.node}/{self.index}")


@dataclass(frozen=True)
class PodPlan:
    name: str
    start: int  # minutes: reserved from here
    end: int
    running_from: int | None = None  # telemetry from here (None: never runs)
    idle_at: int | None = None  # minutes: an IDLE_MINUTES block of activity 0


@dataclass(frozen=True)
class ClaimPlan:
    name: str
    namespace: str
    card: Card
    profile: str | None  # None: the whole GPU
    placement: int
    start: int
    end: int
    pods: tuple[PodPlan, ...]
    sharing: str = "exclusive"
    device_class: str = "gpu.nvidia.com"


NODES = ("dra-node-0", "dra-node-1", "dra-node-2")
CARDS = (
    Card("dra-node-0", 0, False), Card("dra-node-0", 1, False), Card("dra-node-0", 2, False),
    Card("dra-node-1", 0, False, (("3g.40gb", 0), ("3g.40gb", 4))),
    Card("dra-node-2", 0, True), Card("dra-node-2", 1, True),
)
_C = CARDS
CLAIMS: tuple[ClaimPlan, ...] = (
    ClaimPlan("whole-a", "dra-team-a", _C[0], None, -1, 0, 360,
              (PodPlan("a-train-0", 0, 360, 0, 100),)),
    ClaimPlan("whole-b", "dra-team-b", _C[1], None, -1, 60, 270,
              (PodPlan("b-train-0", 60, 270, 90, 200),)),
    ClaimPlan("shared-c", "dra-team-c", _C[2], None, -1, 0, 360,
              (PodPlan("c-serve-0", 0, 360, 0, 260), PodPlan("c-serve-1", 120, 240, None)),
              sharing="timeslicing"),
    ClaimPlan("static-mig-a", "dra-team-a", _C[3], "3g.40gb", 0, 0, 360,
              (PodPlan("a-nb-0", 0, 360, 0, 30),), device_class="mig.nvidia.com"),
    ClaimPlan("dyn-b-1g", "dra-team-b", _C[4], "1g.10gb", 0, 20, 65,
              (PodPlan("b-job-1", 20, 65, 20),), device_class="mig.nvidia.com"),
    ClaimPlan("dyn-b-2g", "dra-team-b", _C[4], "2g.20gb", 2, 130, 350,
              (PodPlan("b-job-2", 130, 350, 130, 180),), device_class="mig.nvidia.com"),
    ClaimPlan("dyn-c-3g", "dra-team-c", _C[4], "3g.40gb", 4, 0, 180,
              (PodPlan("c-job-3", 0, 180, 0, 120),), device_class="mig.nvidia.com"),
    ClaimPlan("dyn-a-pending", "dra-team-a", _C[5], "4g.40gb", 0, 60, 120,
              (PodPlan("a-pending", 60, 120, None),), device_class="mig.nvidia.com"),
)
TEAMS = {"dra-team-a": "team-a", "dra-team-b": "team-b", "dra-team-c": "team-c"}


def _uuid(seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def share(claim: ClaimPlan) -> float:
    if claim.profile is None:
        return 1.0
    return _compute_slices(claim.profile) / COMPUTE_SLICES


def _compute_slices(profile: str) -> int:
    """`3g.40gb` -> 3, read from the name (independent of the billing code's tables)."""
    return int(profile.split("g", 1)[0])


def _device_name(card: Card, profile: str | None, placement: int) -> str:
    if profile is None:
        return f"gpu-{card.index}"
    return f"gpu-{card.index}-mig-{profile.replace('.', '')}-{placement}"


class DraPool:
    """The pool over `[start, start + 6 h)` (the plan's minutes are fixed); `tag` makes the
    claims' and pods' UIDs those of one repetition of the plan (`simulator.dra_fleet`)."""

    def __init__(self, start: datetime, tag: str = "") -> None:
        self.start = start
        self.end = start + timedelta(minutes=BLOCK_MINUTES)
        self.tag = tag

    def at(self, minute: int) -> datetime:
        return self.start + timedelta(minutes=minute)

    # API objects --------------------------------------------------------------------------
    def slices(self) -> list[dict[str, Any]]:
        """One ResourceSlice per node: whole GPUs, static MIG devices, and every placement a
        dynamic card could create (partitions that consume the card's counters)."""
        out = []
        for node in NODES:
            devices: list[dict[str, Any]] = []
            for card in (c for c in CARDS if c.node == node):
                devices.extend(self._card_devices(card))
            out.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{DRIVER}"},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                      "resourceSliceCount": 1},
                         "devices": devices},
            })
        return out

    def _card_devices(self, card: Card) -> list[dict[str, Any]]:
        base = {"productName": {"string": PRODUCT}, "index": {"int": card.index}}
        whole = {"name": _device_name(card, None, -1), "attributes": {
            **base, "type": {"string": "gpu"}, "uuid": {"string": card.uuid}},
            "capacity": {"memory": {"value": "80Gi"}}}
        if card.static_mig:
            return [self._mig_device(card, p, s, base, dynamic=False) for p, s in card.static_mig]
        if not card.dynamic:
            return [whole]
        wanted = sorted({(c.profile, c.placement) for c in CLAIMS if c.card == card and c.profile})
        return [whole, *(self._mig_device(card, str(p), s, base, dynamic=True) for p, s in wanted)]

    def _mig_device(self, card: Card, profile: str, placement: int, base: dict[str, Any],
                    *, dynamic: bool) -> dict[str, Any]:
        device: dict[str, Any] = {"name": _device_name(card, profile, placement), "attributes": {
            **base, "type": {"string": "mig"}, "profile": {"string": profile},
            "parentUUID": {"string": card.uuid}, "memorySliceStart": {"int": placement}}}
        if not dynamic:
            mig_uuid = "MIG-" + _uuid(f"{card.uuid}/{profile}/{placement}")[4:]
            device["attributes"]["uuid"] = {"string": mig_uuid}
        else:
            device["consumesCounters"] = [{"counterSet": f"gpu-{card.index}-counters", "counters": {
                "memory-slices": {"value": str(_compute_slices(profile))}}}]
        return device

    def device_classes(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                 "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && "
                                                  f"device.attributes['{DRIVER}'].type == '{kind}'"}}]}}
                for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))]

    def claim_object(self, claim: ClaimPlan, minute: int) -> dict[str, Any] | None:
        """The claim as the API shows it at `minute` (None before allocation or once gone): a
        released claim stays visible, being deleted, until the next snapshot after its end."""
        if minute < claim.start or minute > claim.end + 10:
            return None
        meta: dict[str, Any] = {"name": claim.name, "namespace": claim.namespace,
                                "uid": _uuid(f"claim/{self.tag}/{claim.name}")[4:],
                                "creationTimestamp": _iso(self.at(claim.start))}
        if minute >= claim.end:
            meta["deletionTimestamp"] = _iso(self.at(claim.end))
        config = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing"}}}}] if claim.sharing == "timeslicing" else []
        reserved = [{"resource": "pods", "name": p.name, "uid": _uuid(f"{self.tag}/{p.name}")[4:]}
                    for p in claim.pods if p.start <= minute <= p.end + 10]
        device = _device_name(claim.card, claim.profile, claim.placement)
        return {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "gpu",
                                               "exactly": {"deviceClassName": claim.device_class}}],
                                 "config": config}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": claim.card.node, "device": device}],
                "config": [{**c, "source": "FromClaim"} for c in config]}},
                "reservedFor": reserved},
        }

    def pod_objects(self, minute: int) -> list[dict[str, Any]]:
        pods = []
        for claim in CLAIMS:
            for p in claim.pods:
                if not (p.start <= minute <= p.end + 10) or minute < claim.start:
                    continue
                meta: dict[str, Any] = {"name": p.name, "namespace": claim.namespace,
                                        "creationTimestamp": _iso(self.at(p.start))}
                if minute >= p.end:
                    meta["deletionTimestamp"] = _iso(self.at(p.end))
                running = p.running_from is not None and minute >= p.running_from
                status: dict[str, Any] = {"phase": "Running" if running else "Pending",
                                          "resourceClaimStatuses": [
                                              {"name": "gpu", "resourceClaimName": claim.name}]}
                if running:
                    status["startTime"] = _iso(self.at(p.start))
                pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                             "spec": {"nodeName": claim.card.node,
                                      "containers": [{"name": "main", "image": "x"}],
                                      "resourceClaims": [{"name": "gpu", "resourceClaimName": claim.name}]},
                             "status": status})
        return pods

    def node_objects(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {
            "gpuledger.io/pool": "dra"}}, "status": {"allocatable": {"cpu": "64"}}} for n in NODES]

    def snapshots(self, every: int = 10) -> Iterator[tuple[datetime, dict[str, list[dict[str, Any]]]]]:
        """The objects as a collector listing every `every` minutes would have seen them (the
        slices, nodes and classes do not change over the plan: one copy shared by all)."""
        fixed = {"slices": self.slices(), "nodes": self.node_objects(),
                 "device_classes": self.device_classes()}
        for minute in range(0, BLOCK_MINUTES + 1 + every, every):
            claims = [o for c in CLAIMS if (o := self.claim_object(c, minute)) is not None]
            at = min(self.at(minute), self.end)
            yield at, {**fixed, "claims": claims, "pods": self.pod_objects(minute)}

    # Telemetry and truth ------------------------------------------------------------------
    def series(self, workload_labels: bool = True) -> Iterator[tuple[dict[str, str], int, float, float]]:
        """(labels, minute, GR_ENGINE_ACTIVE, FB_USED MiB) of every minute a pod's series exists;
        without `workload_labels` a series names its claim only (`dra_*`), not its pod."""
        for claim in CLAIMS:
            runner = claim.pods[0]
            if runner.running_from is None:
                continue
            labels = self._labels(claim, runner)
            if not workload_labels:
                labels = {k: v for k, v in labels.items() if k not in ("pod", "namespace", "container")}
            for minute in range(max(runner.running_from, claim.start), min(runner.end, claim.end)):
                yield labels, minute, (0.0 if _idle(runner, minute) else BUSY), 4096.0

    def _labels(self, claim: ClaimPlan, pod: PodPlan) -> dict[str, str]:
        card = claim.card
        labels = {"gpu": str(card.index), "UUID": card.uuid, "device": f"nvidia{card.index}",
                  "modelName": PRODUCT, "Hostname": card.node, "pod": pod.name,
                  "namespace": claim.namespace, "container": "main",
                  "dra_claim_name": claim.name, "dra_claim_namespace": claim.namespace,
                  "dra_driver_name": DRIVER, "dra_pool_name": card.node,
                  "dra_device_name": _device_name(card, claim.profile, claim.placement)}
        if claim.profile:
            mig_uuid = "MIG-" + _uuid(f"{self.tag}/{claim.name}/{claim.start}")[4:]
            labels.update({"GPU_I_PROFILE": claim.profile, "GPU_I_ID": str(1 + claim.placement),
                           "dra_mig_profile": claim.profile, "dra_mig_device_uuid": mig_uuid})
        return labels

    def truth(self, until: int = BLOCK_MINUTES) -> dict[str, dict[str, float]]:
        """Per team: `card_hours` and `idle_card_hours` (module docstring) of the minutes before
        `until`."""
        out: dict[str, dict[str, float]] = {}
        for claim in CLAIMS:
            team = out.setdefault(TEAMS[claim.namespace], {"card_hours": 0.0, "idle_card_hours": 0.0})
            runner = claim.pods[0]
            idle = _idle_minutes(runner, claim, until)
            for minute in range(claim.start, min(claim.end, until)):
                team["card_hours"] += share(claim) / 60
                team["idle_card_hours"] += share(claim) / 60 if minute in idle else 0.0
        return out

    def write_openmetrics(self, path: Path, *, workload_labels: bool = True,
                          ksm_claims: bool = False) -> None:
        """The dcgm series; with `ksm_claims` also kube-state-metrics' `kube_pod_resourceclaim_info`
        (one series per pod and claim, every minute the pod exists: created to deleted)."""
        base = int(self.start.timestamp())
        with path.open("w") as out:
            for metric, index in (("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2), ("DCGM_FI_DEV_FB_USED", 3)):
                out.write(f"# TYPE {metric} gauge\n")
                for item in self.series(workload_labels):
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(item[0].items()))
                    out.write(f"{metric}{{{labels}}} {item[index]} {base + 60 * item[1]}\n")
            if ksm_claims:
                out.write("# TYPE kube_pod_resourceclaim_info gauge\n")
                for claim in CLAIMS:
                    for p in claim.pods:
                        labels = (f'claim_name="gpu",namespace="{claim.namespace}",pod="{p.name}",'
                                  f'resourceclaim_name="{claim.name}",resourceclaim_template_name="",'
                                  f'uid="{_uuid(f"{self.tag}/{p.name}")[4:]}"')
                        out.writelines(f"kube_pod_resourceclaim_info{{{labels}}} 1 {base + 60 * m}\n"
                                       for m in range(max(p.start, claim.start), p.end))
            out.write("# EOF\n")


def _idle_minutes(pod: PodPlan, claim: ClaimPlan, until: int) -> set[int]:
    """The minutes of `pod`'s idle block its series shows before `until`, when that run is at
    least `IDLE_RUN_MINUTES` long (a shorter one, cut by the series' end, is not idle time)."""
    if pod.running_from is None or pod.idle_at is None:
        return set()
    lo = max(pod.idle_at, pod.running_from, claim.start)
    hi = min(pod.idle_at + IDLE_MINUTES, pod.end, claim.end, until)
    return set(range(lo, hi)) if hi - lo >= IDLE_RUN_MINUTES else set()


def _idle(pod: PodPlan, minute: int) -> bool:
    return pod.idle_at is not None and pod.idle_at <= minute < pod.idle_at + IDLE_MINUTES


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
