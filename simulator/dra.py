"""A DRA GPU pool: whole-GPU claims, static MIG claims, dynamic MIG claims created and destroyed
during the day, one shared (time-sliced) claim, with their ResourceSlices, claims, pods,
`dra_*`-labelled dcgm series, kube-state-metrics series and ground truth.

Why its own generator: a DRA pod requests no `nvidia.com/gpu`, and a dynamic MIG device may have
no series at all, so the pool must produce the API objects (what the claims hold) and the
telemetry (what was idle) separately, and the truth from the plan of the day itself, never from
the billing rule under test. The plan is `CLAIMS` (`simulator.dra_plan`), in minutes from the
window's start.

Shapes as upstream writes them (tests/fixtures/planes/dra, SOURCES.md): `resource.k8s.io/v1`
ResourceSlices of NVIDIA's driver (device names `gpu-<minor>` and
`gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>`, unqualified
attributes `type, uuid, parentUUID, profile, productName, brand, architecture, ...`, no index
and no placement attribute; static MIG devices with `memorySlice<N>` capacities, dynamic ones
consuming `memory-slice-N` counters of a `gpu-<minor>-counter-set` and without a `uuid`);
claims without `allocationTimestamp` (alpha), created before their first consumer is scheduled
where the plan says so (`ClaimPlan.created`: a claim waiting for its first consumer); pods with
their `PodScheduled` condition. The series are `simulator.dra_metrics`'s.

Field effects (`DraField`, none by default): an exporter down on a node for a while (no series
there), dynamic MIG devices created minutes after their claim's allocation (no series before).
The plan itself has a pod pending on its prepared claim (`whole-b`: reserved at 60, running at
90) and a claim whose pod never runs (`dyn-a-pending`).

Truth (`truth()`): card-hours per team = sum over claims of device share (whole 1, MIG compute
slices / 7) x minutes held / 60 (allocation = the first pod's scheduling, to release), a shared
claim split evenly among the pods reserving it; idle card-hours = the same for the minutes a
pod's series shows activity 0 in its idle block (`IDLE_MINUTES` long), in runs of at least 30
minutes its series shows; activity-unknown card-hours = the claim's card-hours in each UTC hour
of the block where no series of the claim exists at all (the product's rule: an hour's
activity is unknown when no sample of it has a reading, docs/decisions/0051).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from gpuledger.simulator.dra_plan import (
    ATTRIBUTES,
    BLOCK_MINUTES,
    BUSY,
    CARDS,
    CLAIMS,
    COMPUTE_SLICES,
    DRIVER,
    IDLE_MINUTES,
    IDLE_RUN_MINUTES,
    MODEL,
    NODES,
    PRODUCT,
    TEAMS,
    Card,
    ClaimPlan,
    DraField,
    PodPlan,
    _uuid,
    compute_slices,
    device_name,
    gpu_instance_id,
    memory_slices,
    mig_uuid,
    share,
    slice_name,
)

__all__ = [
    "ATTRIBUTES",
    "BLOCK_MINUTES",
    "BUSY",
    "CARDS",
    "CLAIMS",
    "COMPUTE_SLICES",
    "DRIVER",
    "IDLE_MINUTES",
    "IDLE_RUN_MINUTES",
    "MODEL",
    "NODES",
    "PRODUCT",
    "TEAMS",
    "Card",
    "ClaimPlan",
    "DraField",
    "DraPool",
    "PodPlan",
    "compute_slices",
    "device_name",
    "gpu_instance_id",
    "memory_slices",
    "mig_uuid",
    "share",
    "slice_name",
]


class DraPool:
    """The pool over `[start, start + 6 h)` (the plan's minutes are fixed); `tag` makes the
    claims' and pods' UIDs those of one repetition of the plan (`simulator.dra_fleet`)."""

    def __init__(self, start: datetime, tag: str = "", field: DraField | None = None) -> None:
        self.start = start
        self.end = start + timedelta(minutes=BLOCK_MINUTES)
        self.tag = tag
        self.field = field or DraField()
        self._fixed: dict[str, list[dict[str, Any]]] | None = None

    def at(self, minute: int) -> datetime:
        return self.start + timedelta(minutes=minute)

    def uid(self, kind: str, name: str) -> str:
        """The UID of a claim (`claim`), pod (`pod`) or node (`node`) of this repetition."""
        return _uuid(f"{self.tag}/{name}" if kind == "pod" else f"{kind}/{self.tag}/{name}")[4:]

    # API objects --------------------------------------------------------------------------
    def slices(self) -> list[dict[str, Any]]:
        """The ResourceSlices of each node's pool: whole GPUs, static MIG devices, and every
        placement a dynamic card could create (partitions that consume the card's counters).
        `resource.k8s.io/v1` refuses a slice with both `sharedCounters` and `devices`, so a
        pool with dynamic cards publishes its counter sets in a second slice (as drivers do)."""
        out: list[dict[str, Any]] = []
        for node in NODES:
            devices: list[dict[str, Any]] = []
            counters: list[dict[str, Any]] = []
            for card in (c for c in CARDS if c.node == node):
                devices.extend(self._card_devices(card))
                if card.dynamic:
                    counters.append({"name": f"gpu-{card.index}-counter-set", "counters": {
                        f"memory-slice-{k}": {"value": "1"} for k in range(8)}})
            parts: list[tuple[str, dict[str, Any]]] = [(slice_name(node), {"devices": devices})]
            if counters:
                parts.append((f"{slice_name(node)}-counters", {"sharedCounters": counters}))
            pool = {"name": node, "generation": 1, "resourceSliceCount": len(parts)}
            out.extend({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": name, "generateName": f"{node}-{DRIVER}-",
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                  "uid": self.uid("node", node), "controller": True}]},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, **part},
            } for name, part in parts)
        return out

    def _card_devices(self, card: Card) -> list[dict[str, Any]]:
        base = {**ATTRIBUTES, "resource.kubernetes.io/pciBusID": {"string": card.pci_bus_id}}
        whole: dict[str, Any] = {"name": device_name(card, None, -1), "attributes": {
            **base, "type": {"string": "gpu"}, "uuid": {"string": card.uuid}},
            "capacity": {"memory": {"value": "80Gi"}}}
        if card.static_mig:
            return [self._mig_device(card, p, s, base) for p, s in card.static_mig]
        if not card.dynamic:
            return [whole]
        whole["consumesCounters"] = [{"counterSet": f"gpu-{card.index}-counter-set", "counters": {
            f"memory-slice-{k}": {"value": "1"} for k in range(8)}}]
        wanted = sorted({(c.profile, c.placement) for c in CLAIMS if c.card == card and c.profile})
        return [whole, *(self._mig_device(card, str(p), s, base) for p, s in wanted)]

    def _mig_device(self, card: Card, profile: str, placement: int, base: dict[str, Any]) -> dict[str, Any]:
        slices = [placement + k for k in memory_slices(profile)]
        device: dict[str, Any] = {"name": device_name(card, profile, placement), "attributes": {
            **base, "type": {"string": "mig"}, "profile": {"string": profile},
            "parentUUID": {"string": card.uuid}},
            "capacity": {"memory": {"value": f"{10 * len(slices)}Gi"},
                         "multiprocessors": {"value": str(16 * compute_slices(profile))}}}
        if card.dynamic:  # an abstract partition: no uuid until a claim creates it
            device["consumesCounters"] = [{"counterSet": f"gpu-{card.index}-counter-set", "counters": {
                f"memory-slice-{k}": {"value": "1"} for k in slices}}]
        else:
            mig = "MIG-" + _uuid(f"{card.uuid}/{profile}/{placement}")[4:]
            device["attributes"]["uuid"] = {"string": mig}
            device["capacity"].update({f"memorySlice{k}": {"value": "1"} for k in slices})
        return device

    def device_classes(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                 "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && "
                                                  f"device.attributes['{DRIVER}'].type == '{kind}'"}}]}}
                for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))]

    def claim_object(self, claim: ClaimPlan, minute: int) -> dict[str, Any] | None:
        """The claim as the API shows it at `minute` (None before it exists or once gone): not
        yet allocated while it waits for its first consumer; a released claim stays visible,
        being deleted, until the next snapshot after its end. No `allocationTimestamp`."""
        if minute < claim.created_at or minute > claim.end + 10:
            return None
        meta: dict[str, Any] = {"name": claim.name, "namespace": claim.namespace,
                                "uid": self.uid("claim", claim.name),
                                "creationTimestamp": _iso(self.at(claim.created_at)),
                                "finalizers": ["resource.kubernetes.io/delete-protection"]}
        if minute >= claim.end:
            meta["deletionTimestamp"] = _iso(self.at(claim.end))
        config = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing"}}}}] if claim.sharing == "timeslicing" else []
        spec = {"devices": {"requests": [{"name": "gpu", "exactly": {
            "allocationMode": "ExactCount", "count": 1, "deviceClassName": claim.device_class}}],
            "config": config}}
        obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                               "metadata": meta, "spec": spec, "status": {}}
        if minute < claim.start:
            return obj
        reserved = [{"resource": "pods", "name": p.name, "uid": self.uid("pod", p.name)}
                    for p in claim.pods if p.start <= minute <= p.end + 10]
        device = device_name(claim.card, claim.profile, claim.placement)
        obj["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": claim.card.node, "device": device}],
            "config": [{**c, "source": "FromClaim"} for c in config]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [claim.card.node]}]}]}},
            "reservedFor": reserved}
        return obj

    def pod_objects(self, minute: int) -> list[dict[str, Any]]:
        pods = []
        for claim in CLAIMS:
            for p in claim.pods:
                if not (p.created_at <= minute <= p.end + 10):
                    continue
                meta: dict[str, Any] = {"name": p.name, "namespace": claim.namespace,
                                        "uid": self.uid("pod", p.name),
                                        "creationTimestamp": _iso(self.at(p.created_at))}
                if minute >= p.end:
                    meta["deletionTimestamp"] = _iso(self.at(p.end))
                running = p.running_from is not None and minute >= p.running_from
                status: dict[str, Any] = {"phase": "Running" if running else "Pending",
                                          "resourceClaimStatuses": [
                                              {"name": "gpu", "resourceClaimName": claim.name}]}
                if minute >= p.start:  # bound to its node: the claim is allocated and reserved
                    status["conditions"] = [{"type": "PodScheduled", "status": "True",
                                             "lastTransitionTime": _iso(self.at(p.start))}]
                    status["startTime"] = _iso(self.at(p.start))
                pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                             "spec": {**({"nodeName": claim.card.node} if minute >= p.start else {}),
                                      "containers": [{"name": "main", "image": "x",
                                                      "resources": {"claims": [{"name": "gpu"}]}}],
                                      "resourceClaims": [{"name": "gpu", "resourceClaimName": claim.name}]},
                             "status": status})
        return pods

    def node_objects(self) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": n, "uid": self.uid("node", n),
            "labels": {"gpuledger.io/pool": "dra", "nvidia.com/gpu.present": "true"}},
            "status": {"allocatable": {"cpu": "64"}}} for n in NODES]

    def snapshots(self, every: int = 10) -> Iterator[tuple[datetime, dict[str, list[dict[str, Any]]]]]:
        """The objects as a collector listing every `every` minutes would have seen them (the
        slices, nodes and classes do not change over the plan: one copy shared by all)."""
        for minute in range(0, BLOCK_MINUTES + 1 + every, every):
            yield min(self.at(minute), self.end), self.objects(minute)

    def objects(self, minute: int) -> dict[str, list[dict[str, Any]]]:
        """The objects a list at `minute` sees."""
        if self._fixed is None:
            self._fixed = {"slices": self.slices(), "nodes": self.node_objects(),
                           "device_classes": self.device_classes()}
        fixed = self._fixed
        claims = [o for c in CLAIMS if (o := self.claim_object(c, minute)) is not None]
        return {**fixed, "claims": claims, "pods": self.pod_objects(minute)}

    # Telemetry and truth ------------------------------------------------------------------
    def hour_of(self, minute: int) -> datetime:
        """The UTC hour `minute` of the plan falls in."""
        return self.at(minute).replace(minute=0, second=0, microsecond=0)

    def device_created(self, claim: ClaimPlan) -> int:
        """When the claim's device exists: a dynamic MIG device from its creation (the field's
        delay after allocation), any other device always."""
        return claim.start + self.field.mig_create_delay if claim.card.dynamic and claim.profile else 0

    def series_minutes(self, claim: ClaimPlan) -> range:
        """The minutes its runner's series could show (before the exporter's holes)."""
        runner = claim.pods[0]
        if runner.running_from is None:
            return range(0)
        lo = max(runner.running_from, claim.start, self.device_created(claim))
        return range(lo, min(runner.end, claim.end))

    def shown(self, claim: ClaimPlan) -> list[int]:
        """The minutes the claim's runner's series is there: running, its device created, its
        node's exporter up."""
        return [m for m in self.series_minutes(claim) if not self.field.down(claim.card.node, m)]

    def series(self, workload_labels: bool = True) -> Iterator[tuple[dict[str, str], int, float, float]]:
        """(labels, minute, GR_ENGINE_ACTIVE, FB_USED MiB) of every minute a claim's runner's
        series exists; without `workload_labels` a series names its claim only (`dra_*`)."""
        for claim in CLAIMS:
            labels = self.labels(claim, claim.pods[0])
            if not workload_labels:
                labels = {k: v for k, v in labels.items() if k not in ("pod", "namespace", "container")}
            for minute in self.shown(claim):
                yield labels, minute, (0.0 if _idle(claim.pods[0], minute) else BUSY), 4096.0

    def labels(self, claim: ClaimPlan, pod: PodPlan) -> dict[str, str]:
        """dcgm-exporter's labels of the claim's device series while `pod` runs on it."""
        card = claim.card
        labels = {"gpu": str(card.index), "UUID": card.uuid, "pci_bus_id": f"0000{card.pci_bus_id.upper()}",
                  "device": f"nvidia{card.index}", "modelName": PRODUCT, "Hostname": card.node,
                  "pod": pod.name, "namespace": claim.namespace, "container": "main",
                  "dra_claim_name": claim.name, "dra_claim_namespace": claim.namespace,
                  "dra_driver_name": DRIVER, "dra_pool_name": card.node,
                  "dra_device_name": device_name(card, claim.profile, claim.placement)}
        if claim.profile:
            labels.update({"GPU_I_PROFILE": claim.profile,
                           "GPU_I_ID": str(gpu_instance_id(claim.profile, claim.placement)),
                           "dra_mig_profile": claim.profile,
                           "dra_mig_device_uuid": mig_uuid(self.tag, claim)})
        return labels

    def truth(self, until: int = BLOCK_MINUTES) -> dict[str, dict[str, float]]:
        """Per team: `card_hours`, `idle_card_hours` and `unknown_card_hours` (module
        docstring) of the minutes before `until`."""
        out: dict[str, dict[str, float]] = {}
        for claim in CLAIMS:
            team = out.setdefault(TEAMS[claim.namespace],
                                  {"card_hours": 0.0, "idle_card_hours": 0.0, "unknown_card_hours": 0.0})
            shown = set(self.shown(claim))
            idle = _idle_minutes(claim.pods[0], shown, until)
            seen_hours = {self.hour_of(m) for m in shown}
            for minute in range(claim.start, min(claim.end, until)):
                team["card_hours"] += share(claim) / 60
                team["idle_card_hours"] += share(claim) / 60 if minute in idle else 0.0
                unseen = self.hour_of(minute) not in seen_hours
                team["unknown_card_hours"] += share(claim) / 60 if unseen else 0.0
        return out


def _idle_minutes(pod: PodPlan, shown: set[int], until: int) -> set[int]:
    """The minutes of `pod`'s idle block its series shows before `until`, in runs of at least
    `IDLE_RUN_MINUTES` (a shorter run, cut by a hole or the series' end, is not idle time)."""
    if pod.idle_at is None:
        return set()
    visible = sorted(m for m in range(pod.idle_at, pod.idle_at + IDLE_MINUTES) if m in shown and m < until)
    out: set[int] = set()
    run: list[int] = []
    for minute in [*visible, None]:
        if minute is not None and (not run or minute == run[-1] + 1):
            run.append(minute)
            continue
        if len(run) >= IDLE_RUN_MINUTES:
            out.update(run)
        run = [minute] if minute is not None else []
    return out


def _idle(pod: PodPlan, minute: int) -> bool:
    return pod.idle_at is not None and pod.idle_at <= minute < pod.idle_at + IDLE_MINUTES


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
