"""What a simpler method would do with the same fleet and demand, and the slice lower bound.

- first-fit: GPUs that may not change keep their layout and serve what they can; the remaining
  instances, in arrival order (a seeded shuffle of the demand), go to the first movable GPU
  with room, opening GPUs in (node, index) order; whole-card demand takes a GPU each.
- first-fit-decreasing: the same, largest instances (compute, then memory slices) first.
- slice lower bound: per model, whole cards + max(ceil(compute slices / 7),
  ceil(memory slices / 8)) of the MIG demand; no packing can use fewer GPUs.

Movable GPUs a baseline leaves empty are freed (MIG disabled), as the optimizer would do.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from gpuledger.core.mig import COMPUTE_SLICES, MEMORY_SLICES, Shape, gpu_model
from gpuledger.optimizer.mig.geometry import AddTable
from gpuledger.optimizer.mig.inputs import Config, Demand, Fleet, Gpu, ModelDemand

GpuKey = tuple[str, int]


@dataclass(frozen=True)
class PackResult:
    final: dict[GpuKey, Config]
    unmet: dict[str, Counter[str]]


def slice_lower_bound(demand: ModelDemand) -> int:
    model = gpu_model(demand.model)
    compute = sum(model.profiles[p].compute * n for p, n in demand.profiles.items())
    memory = sum(model.profiles[p].memory * n for p, n in demand.profiles.items())
    return demand.whole + max(-(-compute // COMPUTE_SLICES), -(-memory // MEMORY_SLICES))


def first_fit(fleet: Fleet, demand: Demand, movable: Mapping[GpuKey, bool], *, decreasing: bool,
              seed: int = 0) -> PackResult:
    """Pack every model's demand with first-fit (or first-fit-decreasing)."""
    final: dict[GpuKey, Config] = {(g.node, g.index): g.config for g in fleet.gpus}
    unmet: dict[str, Counter[str]] = {}
    for d in demand.models:
        gpus = sorted((g for g in fleet.gpus if g.model == d.model), key=lambda g: (g.node, g.index))
        placed, missing = _pack_model(gpus, d, movable, decreasing, seed)
        final.update(placed)
        unmet[d.model] = missing
    return PackResult(final, unmet)


def _pack_model(
    gpus: list[Gpu], demand: ModelDemand, movable: Mapping[GpuKey, bool], decreasing: bool, seed: int
) -> tuple[dict[GpuKey, Config], Counter[str]]:
    # 1. Fixed GPUs serve what they already hold.
    need: Counter[str] = Counter(demand.profiles)
    whole_need = demand.whole
    fixed = [g for g in gpus if not movable[(g.node, g.index)]]
    free = [g for g in gpus if movable[(g.node, g.index)]]
    for g in fixed:
        if g.config is None:
            whole_need = max(0, whole_need - 1)
        else:
            for p, n in g.config:
                need[p] = max(0, need[p] - n)
    result: dict[GpuKey, Config] = {}
    # 2. Whole-card demand takes movable GPUs first (already-whole ones first: no change).
    free.sort(key=lambda g: (g.config is not None, g.node, g.index))
    missing: Counter[str] = Counter()
    for g in free[:whole_need]:
        result[(g.node, g.index)] = None
    if whole_need > len(free):
        missing["whole"] = whole_need - len(free)
    rest = sorted(free[whole_need:], key=lambda g: (g.node, g.index))
    # 3. Instances in arrival (or decreasing) order, first GPU with room.
    items = [p for p, n in sorted(need.items()) for _ in range(n)]
    model = gpu_model(demand.model)
    if decreasing:
        items.sort(key=lambda p: (-model.profiles[p].compute, -model.profiles[p].memory, p))
    else:
        random.Random(seed).shuffle(items)
    table = AddTable(demand.model, need)
    shapes: list[Shape] = [() for _ in rest]
    heaps: dict[Shape, list[int]] = {(): list(range(len(rest)))}
    for p in items:
        best = None
        for shape in table.accepting(p):
            heap = heaps.get(shape)
            while heap and shapes[heap[0]] != shape:
                heapq.heappop(heap)  # stale entry: that GPU moved on to another shape
            if heap and (best is None or heap[0] < best):
                best = heap[0]
        if best is None:
            missing[p] += 1
            continue
        grown = table.add(shapes[best], p)
        assert grown is not None
        shapes[best] = grown
        heapq.heappush(heaps.setdefault(grown, []), best)
    for g, shape in zip(rest, shapes, strict=True):
        result[(g.node, g.index)] = shape if shape else None
    return result, missing
