"""The queue-system seam's shared ground: the default system and the registry each stage keeps.

Why: a queue system (Kueue, Volcano) touches three stages that may not import each other: the
collectors read its objects and metrics, the optimizer reads its quotas, the actuator writes
them. So a queue system is not one object but one *name* under which each stage registers its
part, in that stage's own `core.registry.Registry`:

- `gpuledger.collectors.queues.<name>`        a `QueueCollector` (inventory + metrics),
- `gpuledger.optimizer.quota.queues.<name>`   a `QuotaReader` (quota objects → the planning model,
                                              the planned numbers → a whole new object body),
- `gpuledger.actuator.queues.<name>`          a `QuotaWriter` (guarded read-modify-write).

A new queue system is one new module per stage, named after the system, that registers itself:
the stage's registry imports `<package>.<name>` the first time the name is asked for. Nothing
else changes (no list to extend, no if-chain).

Pure Python: nothing heavy, nothing of ours but `core.errors` and `core.registry`.
"""

from __future__ import annotations

from typing import TypeVar

from gpuledger.core.errors import InputError
from gpuledger.core.registry import Registry

DEFAULT_QUEUE_SYSTEM = "kueue"
"""The queue system used when nothing names another."""

T = TypeVar("T")


def queue_registry(stage: str, package: str) -> Registry[T]:
    """One stage's registry of queue-system parts: discovered as `<package>.<name>`, an unknown
    system refused in one `InputError` line (`queue system 'slurm': no collect support (known:
    kueue, volcano)`)."""
    return Registry("queue system", error=InputError, missing=f"no {stage} support", package=package)
