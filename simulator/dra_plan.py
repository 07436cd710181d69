"""The DRA pool's plan (`simulator.dra`): its cards, claims and pods in minutes from a block's
start, the field effects, and the pure facts of NVIDIA's names the pool's objects and series
use (device names, GPU-instance ids, MIG UUIDs, shares).

Why apart from the pool: the plan is data the truth, the API objects and the series all read;
the pool (`DraPool`) turns it into those. `simulator.dra` re-exports every name here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gpuledger.core.mig import gpu_model

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
ATTRIBUTES: dict[str, dict[str, str]] = {
    "architecture": {"string": "Hopper"}, "brand": {"string": "Nvidia"},
    "cudaComputeCapability": {"version": "9.0.0"}, "cudaDriverVersion": {"version": "13.0.0"},
    "driverVersion": {"version": "580.95.5"}, "productName": {"string": PRODUCT},
}
"""The attributes every NVIDIA DRA device carries besides its identity (deviceinfo.go)."""


@dataclass(frozen=True)
class Card:
    node: str
    index: int
    dynamic: bool  # MIG devices created on demand (partitionable) vs whole/static
    static_mig: tuple[tuple[str, int], ...] = ()  # (profile, placement) pre-created

    @property
    def uuid(self) -> str:
        return _uuid(f"{self.node}/{self.index}")

    @property
    def pci_bus_id(self) -> str:
        return f"0000:{0x18 + 0x10 * self.index:02x}:00.0"


@dataclass(frozen=True)
class PodPlan:
    name: str
    start: int  # minutes: scheduled (reserves its claim) from here
    end: int
    running_from: int | None = None  # telemetry from here (None: never runs)
    idle_at: int | None = None  # minutes: an IDLE_MINUTES block of activity 0
    created: int | None = None  # minutes: created (pending, unscheduled) from here; None: at `start`

    @property
    def created_at(self) -> int:
        return self.start if self.created is None else self.created


@dataclass(frozen=True)
class ClaimPlan:
    name: str
    namespace: str
    card: Card
    profile: str | None  # None: the whole GPU
    placement: int
    start: int  # allocated: when its first pod is scheduled
    end: int
    pods: tuple[PodPlan, ...]
    sharing: str = "exclusive"
    device_class: str = "gpu.nvidia.com"
    created: int | None = None  # minutes: the claim object exists from here; None: at `start`

    @property
    def created_at(self) -> int:
        return self.start if self.created is None else self.created


@dataclass(frozen=True)
class DraField:
    """DRA field effects (module docstring); none by default."""

    exporter_down: tuple[tuple[str, int, int], ...] = ()
    """(node, from, to): dcgm-exporter on the node is down over `[from, to)` minutes."""
    mig_create_delay: int = 0
    """Minutes between a dynamic MIG claim's allocation and its device's creation."""

    def down(self, node: str, minute: int) -> bool:
        return any(n == node and lo <= minute < hi for n, lo, hi in self.exporter_down)

    @classmethod
    def holes(cls) -> DraField:
        """The holes of issue 29: an exporter down for two hours on the static MIG node and for
        15 minutes on the whole-GPU node, dynamic MIG devices created 5 minutes late (with
        the plan's pod pending on its prepared claim, team-b is billed 17% low without the
        claims)."""
        return cls(exporter_down=(("dra-node-1", 150, 270), ("dra-node-0", 200, 215)), mig_create_delay=5)


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
              (PodPlan("b-train-0", 60, 270, 90, 200, created=20),), created=20),
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
    return compute_slices(claim.profile) / COMPUTE_SLICES


def compute_slices(profile: str) -> int:
    """`3g.40gb` -> 3, read from the name (independent of the billing code's tables)."""
    return int(profile.split("g", 1)[0])


def memory_slices(profile: str) -> range:
    """How many memory slices (of 8) `profile` covers on an H100 80GB (the catalog's facts)."""
    return range(gpu_model(MODEL).profiles[profile].memory)


def device_name(card: Card, profile: str | None, placement: int) -> str:
    """NVIDIA's device names (mig.go `ToCanonicalName`), the card's index as its minor."""
    if profile is None:
        return f"gpu-{card.index}"
    gi = gpu_model(MODEL).profiles[profile].id
    return f"gpu-{card.index}-mig-{profile.replace('.', '')}-{gi}-{placement}"


def gpu_instance_id(profile: str, placement: int) -> int:
    """The driver's GPU-instance id dcgm-exporter labels a MIG series with (`GPU_I_ID`): a
    number of the driver's, not the placement."""
    return {("3g.40gb", 0): 1, ("3g.40gb", 4): 2, ("4g.40gb", 0): 1, ("2g.20gb", 2): 5,
            ("1g.10gb", 0): 13}.get((profile, placement), 9 + placement)


def slice_name(node: str) -> str:
    """The node's ResourceSlice name (`generateName` `<node>-gpu.nvidia.com-` plus 5 characters)."""
    return f"{node}-{DRIVER}-{_uuid(node)[4:9]}"


def mig_uuid(tag: str, claim: ClaimPlan) -> str:
    """A MIG device's UUID: a static one keeps it, a dynamic one gets a new one per claim."""
    if not claim.card.dynamic:
        return "MIG-" + _uuid(f"{claim.card.uuid}/{claim.profile}/{claim.placement}")[4:]
    return "MIG-" + _uuid(f"{tag}/{claim.name}/{claim.start}")[4:]
