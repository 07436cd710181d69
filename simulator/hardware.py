"""The fleet's hardware: nodes, cards, and the devices pods can hold on them ("slots").

Every card is cut into slots whose shares sum to one, so card-hours always add up to GPUs x
hours:
- exclusive: one slot, share 1;
- MIG: one slot per GPU instance (share = compute slices / 7, placed by `core.mig`), plus a
  *stranded* remainder nobody can hold when the layout leaves compute slices unused;
- time-sliced: `replicas` slots of 1/replicas (`vgpu` = replica index, as the device plugin
  numbers them);
- HAMi vGPU: slots of declared fractions (a `vgpu_splits` entry), the rest stranded.

A slot exists for a span of steps: a MIG reconfiguration ends the old instances and starts
new ones (the `scenario.mig_reconfigure` knob).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache

from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, Placement, Shape, gpu_model, shape_of
from gpuledger.simulator.fleet import FleetSpec, PoolSpec, SharingMode
from gpuledger.simulator.timebase import Timebase

PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB, 0x1B, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC,
             0xBB, 0xDC)
"""Bus numbers of the cards in a node, by index (an HGX board's layout)."""
RESERVED_MIB = 512.0
"""Framebuffer the driver keeps on a whole card (FB_USED never reaches the full size)."""


@dataclass(frozen=True, slots=True)
class Gpu:
    uuid: str
    node: int
    index: int
    model: str
    pool: int
    sharing: SharingMode
    replicas: int | None
    memory_mib: float
    pci_bus_id: str


@dataclass(slots=True)
class Node:
    name: str
    pool: int
    gpus: list[int] = field(default_factory=list)
    mig_epochs: list[tuple[int, int, str]] = field(default_factory=list)
    """MIG config spans `(start_step, end_step, config name)` covering the window."""
    replacements: list[int] = field(default_factory=list)
    """Cards that replaced one of `gpus` mid-window (field mode), listed apart so the node
    still counts its physical GPUs once."""


@dataclass(frozen=True, slots=True)
class Slot:
    """A device a pod can hold: a whole card, a MIG instance, a replica or a vGPU cut."""

    gpu: int
    gi_id: int
    vgpu: str | None
    profile: str | None
    share: float
    memory_mib: float
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Stranded:
    """Capacity of a card no slot covers: MIG compute slices no instance uses (`stranded`:
    only a reconfiguration frees them), or a vGPU card's uncut fraction (`unallocated`)."""

    gpu: int
    share: float
    start: int
    end: int
    state: str = "stranded"


@dataclass
class Hardware:
    pools: tuple[PoolSpec, ...]
    nodes: list[Node]
    gpus: list[Gpu]
    slots: list[Slot]
    stranded: list[Stranded]


def gi_id(placement: Placement, memory_slices: int) -> int:
    """GPU instance id from the placement: NVIDIA numbers instances by size and start slot
    (8 slices: 0; 4: 1-2; 2: 3-6; 1: 7-14), so ids are unique within a layout."""
    base = {MEMORY_SLICES: 0, 4: 1, 2: 3, 1: 7}[memory_slices]
    return base + placement.start // memory_slices


def card_uuid(cluster: str, node: str, index: int) -> str:
    """A stable `GPU-…` UUID derived from where the card sits (same hardware for every seed)."""
    h = hashlib.sha256(f"{cluster}/{node}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def build(spec: FleetSpec, tb: Timebase) -> Hardware:
    """Build nodes, cards and slots for the window (steps 0..tb.steps)."""
    nodes: list[Node] = []
    gpus: list[Gpu] = []
    slots: list[Slot] = []
    stranded: list[Stranded] = []
    reconfigs = max(int(spec.scenario.mig_reconfigure), spec.field.mig_layout_changes)
    reconfig_done = 0
    for p_idx, pool in enumerate(spec.pools):
        per_node = spec.pool_gpus_per_node(pool)
        mig_names = list(pool.mig_configs)
        split_turn = 0
        for n in range(pool.nodes):
            node = Node(name=f"{pool.name}-{n:03d}", pool=p_idx)
            node_idx = len(nodes)
            nodes.append(node)
            # 1. The node's MIG config epochs (one, or two around the scenario's reconfiguration).
            if pool.sharing == "mig":
                first = mig_names[n % len(mig_names)]
                if reconfig_done < reconfigs and tb.steps > 1:
                    at = reconfigure_step(tb)
                    nxt = mig_names[(n + 1) % len(mig_names)]
                    node.mig_epochs = [(0, at, first), (at, tb.steps, nxt)]
                    reconfig_done += 1
                else:
                    node.mig_epochs = [(0, tb.steps, first)]
            # 2. Cards and their slots.
            for i in range(per_node):
                memory = float(gpu_model(pool.model).memory_mib or 0)
                gpu = Gpu(
                    uuid=card_uuid(spec.cluster, node.name, i), node=node_idx, index=i,
                    model=pool.model, pool=p_idx, sharing=pool.sharing,
                    replicas=pool.replicas if pool.sharing == "timeslice" else None,
                    memory_mib=memory,
                    pci_bus_id=f"00000000:{PCI_BUSES[i % len(PCI_BUSES)]:02X}:00.0",
                )
                g_idx = len(gpus)
                gpus.append(gpu)
                node.gpus.append(g_idx)
                if pool.sharing == "exclusive":
                    slots.append(Slot(g_idx, -1, None, None, 1.0, memory - RESERVED_MIB, 0, tb.steps))
                elif pool.sharing == "timeslice":
                    for r in range(pool.replicas):
                        slots.append(Slot(g_idx, -1, str(r), None, 1.0 / pool.replicas,
                                          memory - RESERVED_MIB, 0, tb.steps))
                elif pool.sharing == "vgpu":
                    split = pool.vgpu_splits[split_turn % len(pool.vgpu_splits)]
                    split_turn += 1
                    for r, frac in enumerate(split):
                        slots.append(Slot(g_idx, -1, str(r), None, frac,
                                          round(frac * (memory - RESERVED_MIB)), 0, tb.steps))
                    rest = 1.0 - sum(split)
                    if rest > 1e-12:
                        stranded.append(Stranded(g_idx, rest, 0, tb.steps, "unallocated"))
                else:
                    for start, end, name in node.mig_epochs:
                        _mig_slots(pool, g_idx, pool.mig_configs[name], start=start, end=end,
                                   slots=slots, stranded=stranded)
    return Hardware(spec.pools, nodes, gpus, slots, stranded)


@cache
def _placed(model_name: str, shape: Shape) -> tuple[Placement, ...]:
    """`core.mig` placement of a profile-count shape (searched once per model and shape)."""
    return tuple(sorted(gpu_model(model_name).place(shape), key=lambda p: p.start))


def _mig_slots(
    pool: PoolSpec, g_idx: int, counts: dict[str, int], *, start: int, end: int,
    slots: list[Slot], stranded: list[Stranded],
) -> None:
    model = gpu_model(pool.model)
    layout = _placed(pool.model, shape_of(counts))
    used = 0
    for placement in layout:
        prof = model.profile(placement.profile)
        used += prof.compute
        memory = float(prof.memory_mib or (model.memory_mib or 0) * prof.memory / MEMORY_SLICES)
        slots.append(Slot(g_idx, gi_id(placement, prof.memory), None, prof.name,
                          prof.compute / COMPUTE_SLICES, memory, start, end))
    if used < COMPUTE_SLICES:
        stranded.append(Stranded(g_idx, (COMPUTE_SLICES - used) / COMPUTE_SLICES, start, end))


def reconfigure_step(tb: Timebase) -> int:
    """Minute 30 of the hour nearest the window's middle (a reconfiguration mid-hour)."""
    middle = tb.origin_s + tb.steps * tb.step_s // 2
    hour = round(middle / 3600) * 3600
    k = (hour + 1800 - tb.origin_s) // tb.step_s
    return int(min(max(k, 1), tb.steps - 1))


def presence_steps(hw: Hardware, tb: Timebase) -> list[tuple[int, int]]:
    """Per card, the steps `[first, end)` it was in its node: from its first slot (or stranded
    part) to its last one. Field mode shortens them (a replaced card ends at the replacement,
    its successor starts after the swap; a churning node's cards exist only while it does),
    and capacity is billed from them (`first_seen`/`last_seen`), so the inventory must never
    claim a card for the whole window; a card with no span at all spans the window."""
    spans: list[tuple[int, int] | None] = [None] * len(hw.gpus)
    parts = [(s.gpu, s.start, s.end) for s in hw.slots]
    parts += [(s.gpu, s.start, s.end) for s in hw.stranded]
    for gpu, lo, hi in parts:
        if lo >= hi:
            continue
        now = spans[gpu]
        spans[gpu] = (lo, hi) if now is None else (min(now[0], lo), max(now[1], hi))
    return [(0, tb.steps) if s is None else s for s in spans]
