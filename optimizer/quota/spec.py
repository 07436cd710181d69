"""The neutral planning model of a queue's quota: what every queue system's reader produces.

Why its own module: the quota input loader, the optimizer's model and each queue system's
reader (`optimizer.quota.queues.<system>`) all speak `QueueSpec`/`Quota`; keeping them here lets the
readers depend on the model without depending on the loader that picks a reader.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuledger.core.errors import InputError

Key = tuple[str, str]
"""(flavor, resource)."""
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True)
class QueueSpec:
    """One ClusterQueue: its cohort, fair-sharing weight and quota per (flavor, resource)."""

    name: str
    cohort: str | None
    weight: float
    quotas: Mapping[Key, Quota]
    resource_groups: tuple[dict[str, Any], ...]
    resource_version: str | None = None
    team: str | None = None
    reclaims: bool = False
    """Kueue's `preemption.reclaimWithinCohort: Any`: work that fits its own nominal quota
    preempts the cohort's borrowers (the replay's step 1b); every other policy, and every other
    queue system, leaves a borrower running (decision 0246)."""
    units: Mapping[str, float] = field(default_factory=dict)
    """Resource → the size the queue's work is admitted in (its mean request per pod of that
    resource): Kueue admits a Workload, Volcano a PodGroup, whole or not at all, so the replay
    admits whole units (decision 0249). A resource without a unit is admitted fluidly, any
    fraction that fits."""

    @property
    def pool(self) -> str:
        """Queues without a cohort share with nobody: each is its own pool."""
        return self.cohort or f"(no cohort: {self.name})"


# 1. Quantities and resources -------------------------------------------------------------------
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(m|k|M|G|Ki|Mi|Gi)?$")
_SUFFIX = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0**2,
           "Gi": 1024.0**3}


MAX_QUANTITY = 100_000.0
"""The largest quota, weight or capacity planned: the design's 100,000-GPU fleet. The model's
tables have one row per unit of capacity, so 1e12 would exhaust memory rather than plan."""


def parse_quantity(value: Any, where: str) -> float:
    """A quota amount or weight: a number or Kubernetes quantity, finite, from 0 to MAX_QUANTITY."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"{where}: expected a quantity, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _QUANTITY.match(str(value).strip())
        if not match:
            raise InputError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 8, 500m)")
        number = float(match.group(1)) * _SUFFIX[match.group(2)]
    if not 0 <= number <= MAX_QUANTITY:  # NaN fails too
        raise InputError(f"{where}: {value!r} must be a number from 0 to {MAX_QUANTITY:,.0f}")
    return number


def is_gpu_resource(name: str, dra: Collection[str] = ()) -> bool:
    """Resources the quota optimizer plans: whole GPUs, MIG instances and the queue system's
    DRA quota resources named in `dra` (Kueue maps DeviceClasses to such names in its own
    Configuration, `resources.deviceClassMappings`; gpuledger cannot tell them from cpu or
    memory by their name, so the operator lists them: `queues.kueue_dra_resources`)."""
    return name == GPU or name.startswith("nvidia.com/mig-") or name in dra


def default_capacity(queues: Sequence[QueueSpec]) -> dict[tuple[str, str, str], float]:
    """Sum of current nominal quotas per (cohort, flavor, resource)."""
    cap: dict[tuple[str, str, str], float] = defaultdict(float)
    for q in queues:
        for (f, r), quota in q.quotas.items():
            cap[(q.pool, f, r)] += quota.nominal
    return dict(cap)
