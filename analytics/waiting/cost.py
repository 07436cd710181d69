"""The cost of waiting: GPU-hours requested but waiting per team and queue, wait p50/p95 per
shape, and the share of waits that free capacity of another shape or cluster could have served.

Why: "we need more GPUs" and "we need a different layout or quota" look the same from a queue
length. Measured in the requester's terms:

1. A workload's wait runs from its creation to the last snapshot that saw it pending (for one
   still waiting: the newest snapshot, so an old warehouse never inflates it to "now"). Its
   size in GPUs: whole GPUs as counted, a MIG instance at its share of a card
   (`analytics.devices.shares.raw_mig_share`, the bill's basis), a DRA claim as one device.
2. GPU-hours waiting = size x wait, summed per (team, queue) over the workloads waiting now.
3. Wait p50/p95 per shape over every stored wait (ended ones and those still running up).
   `typical_wait` is the p50 of the *ended* waits of a shape: how long such requests usually
   wait before they start (none ended yet: unknown, never a guess).
4. Servable elsewhere: a waiting workload whose verdict is fragmentation (a layout change fits
   it) or that has a suggestion (another shape, queue, pool or cluster has room now,
   `analytics.waiting.suggest`). The share is of the workloads waiting now: capacity in the
   past was not stored, so older waits are not judged against it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpuledger.analytics.billing.special_lines import SpecialLine
from gpuledger.analytics.capacity.now import MIG_PREFIX
from gpuledger.analytics.devices.shares import raw_mig_share
from gpuledger.analytics.waiting.why import FRAGMENTED, Pending, Verdict, request_shape
from gpuledger.core.errors import InputError


def size_in_gpus(p: Pending, basis: str = "compute") -> float:
    """Step 1: the GPUs a workload asks for, MIG at its share of a card."""
    shape = request_shape(p.requests)
    if shape is None:
        return float(len(p.claims))
    resource, amount = shape
    if resource.startswith(MIG_PREFIX):
        try:
            return amount * raw_mig_share("", resource[len(MIG_PREFIX):], basis)
        except InputError:
            return 0.0  # a profile name no rule can size (never satisfiable anyway)
    return amount if resource == "nvidia.com/gpu" else 0.0


def wait_hours(p: Pending, now: datetime) -> float | None:
    """Step 1: hours from creation to the last snapshot that saw it pending (`now` when no
    snapshot time is stored): a wait still running and an ended one both end there."""
    if p.created_at is None:
        return None
    end = p.last_seen or now
    return max(0.0, (end - p.created_at).total_seconds() / 3600)


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method), of a non-empty sequence."""
    import numpy as np

    return float(np.quantile(np.asarray(values, dtype=float), q))


@dataclass(frozen=True, slots=True)
class QueueWait:
    team: str
    queue: str
    waiting: int
    gpu_hours_waiting: float
    servable_elsewhere: int

    @property
    def servable_share(self) -> float:
        return self.servable_elsewhere / self.waiting if self.waiting else 0.0


@dataclass(frozen=True, slots=True)
class ShapeWait:
    shape: str
    waits: int
    p50_hours: float
    p95_hours: float


def shape_key(p: Pending) -> str:
    shape = request_shape(p.requests)
    return shape[0] if shape else ("dra claim" if p.claims else "other")


def by_queue(waiting: Iterable[Pending], verdicts: Mapping[tuple[str, str, str], Verdict],
             suggested: set[tuple[str, str, str]], teams: Mapping[str, str], now: datetime, *,
             basis: str = "compute") -> list[QueueWait]:
    """Steps 2 and 4 for the workloads waiting now, per (team, queue)."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    hours: dict[tuple[str, str], float] = defaultdict(float)
    servable: dict[tuple[str, str], int] = defaultdict(int)
    for p in waiting:
        key = (teams.get(p.namespace) or SpecialLine.UNATTRIBUTED.value, p.queue or "(none)")
        ident = (p.kind, p.namespace, p.name)
        count[key] += 1
        hours[key] += size_in_gpus(p, basis) * (wait_hours(p, now) or 0.0)
        verdict = verdicts.get(ident)
        if ident in suggested or (verdict is not None and verdict.reason == FRAGMENTED):
            servable[key] += 1
    return [QueueWait(t, q, count[(t, q)], hours[(t, q)], servable[(t, q)]) for t, q in sorted(count)]


def by_shape(history: Iterable[Pending], now: datetime) -> list[ShapeWait]:
    """Step 3: wait p50/p95 per shape over every stored wait (those still running up are
    measured like ended ones, to the last snapshot that saw them, see step 1)."""
    waits: dict[str, list[float]] = defaultdict(list)
    for p in history:
        h = wait_hours(p, now)
        if h is not None:
            waits[shape_key(p)].append(h)
    return [ShapeWait(s, len(v), _quantile(v, 0.5), _quantile(v, 0.95)) for s, v in sorted(waits.items())]


def typical_wait(history: Iterable[Pending], waiting: set[tuple[str, str, str]], shape: str,
                 now: datetime) -> float | None:
    """Step 3: p50 hours of the ended waits of `shape`, or None when none has ended."""
    ended = [h for p in history if (p.kind, p.namespace, p.name) not in waiting and shape_key(p) == shape
             and (h := wait_hours(p, now)) is not None]
    return _quantile(ended, 0.5) if ended else None
