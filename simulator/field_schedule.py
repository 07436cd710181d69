"""Field effect that changes the schedule (and so the truth): pods restarted on the same card.

A restart ends the pod at the restart step and, `RESTART_GAP_S` later, a new pod of the same
owner holds the very same slots until the old pod would have ended: a Deployment's pod gets a
new name, a StatefulSet's keeps its name (as Kubernetes does), both get a new uid, and the new
pod starts with the usual loading minutes, so the truth (card-hours per pod, idle) follows
what happened. New pods and allocations are appended, so every other pod's ids, and with them
its counter-based noise, stay as they were. Pods are picked by position among those holding
a card across the window's middle, which makes the choice the same for every chunking.
"""

from __future__ import annotations

import hashlib

import numpy as np

from gpuledger.simulator.timebase import Timebase
from gpuledger.simulator.workloads import Pods, Schedule

RESTART_GAP_S = 120
"""How long the card stands free while the pod is recreated."""
_LIST_FIELDS = tuple(Pods.__dataclass_fields__)


def restart_step(tb: Timebase, i: int) -> int:
    """The i-th restart happens 7 minutes apart from the window's middle on."""
    return min(tb.steps // 2 + i * max(1, 420 // tb.step_s), tb.steps - 1)


def restart_pods(sched: Schedule, tb: Timebase, n: int) -> Schedule:
    """`sched` with `n` pods restarted (see the module docstring); unchanged when n is 0."""
    if n <= 0:
        return sched
    pods = sched.pods
    middle = tb.steps // 2
    gap = max(1, RESTART_GAP_S // tb.step_s)
    chosen = [p for p in range(len(pods)) if pods.start[p] < middle and pods.end[p] > middle + 2 * gap
              + n * max(1, 420 // tb.step_s)][:n]
    slot, pod, start, end = (list(a) for a in (sched.alloc_slot, sched.alloc_pod,
                                               sched.alloc_start, sched.alloc_end))
    for i, p in enumerate(chosen):
        at = restart_step(tb, i)
        new = _copy_pod(pods, p, start=at + gap, tag=f"restart-{i}")
        pods.end[p] = at
        for a in np.flatnonzero(sched.alloc_pod == p):
            if start[a] < at < end[a]:
                slot.append(slot[a])
                pod.append(new)
                start.append(at + gap)
                end.append(end[a])
                end[a] = at
    return Schedule(
        pods=pods, alloc_slot=np.array(slot, dtype=np.int64), alloc_pod=np.array(pod, dtype=np.int64),
        alloc_start=np.array(start, dtype=np.int64), alloc_end=np.array(end, dtype=np.int64),
        pod_cls=np.array(pods.cls, dtype=np.int8), pod_level=np.array(pods.level, dtype=np.float64),
        pod_p2=np.array(pods.p2, dtype=np.float64), pod_mem=np.array(pods.mem_frac, dtype=np.float64),
        pod_start=np.array(pods.start, dtype=np.int64),
    )


def _copy_pod(pods: Pods, p: int, *, start: int, tag: str) -> int:
    """Append a copy of pod `p` starting at `start`; returns its id."""
    for name in _LIST_FIELDS:
        column = getattr(pods, name)
        value = column[p]
        column.append(dict(value) if isinstance(value, dict) else value)
    new = len(pods) - 1
    digest = hashlib.sha256(f"{pods.uid[p]}/{tag}".encode()).hexdigest()
    pods.uid[new] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    if pods.owner_kind[p] != "StatefulSet":
        pods.name[new] = f"{pods.owner_name[p]}-r{digest[:4]}"
    pods.start[new] = start
    return new
