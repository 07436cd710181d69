"""Seeded synthetic fleets and demands for benchmarks and tests (never for real plans).

`random_fleet` gives nodes of 8 GPUs of mixed models with random current layouts (a random
valid shape per GPU, some MIG-disabled) and some busy instances; `random_demand` draws
instances of a profile mix until their compute slices reach a fraction of the fleet's.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from gpuledger.core.mig import COMPUTE_SLICES, gpu_model
from gpuledger.optimizer.mig.geometry import target_shapes, valid_shapes
from gpuledger.optimizer.mig.inputs import BusyInstance, Config, Demand, Fleet, Gpu, ModelDemand, Node

CLASSIC: dict[str, tuple[str, ...]] = {
    "A100-SXM4-40GB": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H200-141GB": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "B200-180GB": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
}
"""Profiles without media extensions, per model."""


def random_fleet(
    gpus: int, *, seed: int = 0, models: Sequence[str] = ("A100-80GB", "H100-80GB", "H200-141GB"),
    gpus_per_node: int = 8, busy_fraction: float = 0.2, whole_fraction: float = 0.1,
    pinned_fraction: float = 0.01, maximal_layouts: bool = False,
) -> Fleet:
    rng = random.Random(seed)
    nodes = []
    for n in range(-(-gpus // gpus_per_node)):
        model = models[n % len(models)]
        profiles = frozenset(CLASSIC[model])
        pool = sorted(target_shapes(model, profiles) if maximal_layouts else valid_shapes(model, profiles))
        size = min(gpus_per_node, gpus - n * gpus_per_node)
        name = f"node-{n:05d}"
        node_gpus = []
        for i in range(size):
            config: Config = None if rng.random() < whole_fraction else rng.choice(pool)
            busy = []
            for p, k in config or ():
                for j in range(k):
                    if rng.random() < busy_fraction:
                        busy.append(BusyInstance(p, "ns", f"{name}-{i}-{p}-{j}",
                                                 evictable=rng.random() >= pinned_fraction))
            node_gpus.append(Gpu(node=name, index=i, model=model, config=config,
                                 uuid=f"GPU-{n:05d}-{i}", busy=tuple(busy)))
        nodes.append(Node(name=name, gpus=tuple(node_gpus)))
    return Fleet(tuple(nodes), source=f"synthetic(gpus={gpus}, seed={seed})")


def random_demand(
    fleet: Fleet, fraction: float = 0.8, *, seed: int = 0, whole_share: float = 0.1,
    weights: Sequence[float] = (4, 2, 3, 2, 1, 1),
) -> Demand:
    """Instances drawn from each model's profile mix until their compute slices reach
    `fraction` of the model's capacity; `whole_share` of the capacity goes to whole cards."""
    rng = random.Random(seed)
    out = []
    for model, n in sorted(Counter(g.model for g in fleet.gpus).items()):
        budget = int(fraction * n * COMPUTE_SLICES)
        whole = int(whole_share * n)
        budget -= whole * COMPUTE_SLICES
        profiles = CLASSIC[model]
        compute = {p: gpu_model(model).profiles[p].compute for p in profiles}
        counts: Counter[str] = Counter()
        while budget > 0:
            p = rng.choices(profiles, weights=weights)[0]
            if compute[p] > budget:
                p = min(profiles, key=lambda q: compute[q])
            counts[p] += 1
            budget -= compute[p]
        out.append(ModelDemand(model, dict(sorted(counts.items())), whole))
    return Demand(tuple(out), source=f"synthetic(fraction={fraction}, seed={seed})")
