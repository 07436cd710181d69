"""Re-read the cluster and check that a plan's fingerprint still describes it.

A plan records, for every object it was computed from, `state_hash` of the part it depends on
(`optimizer.plan.contract.ObservedObject`). Before the first write the actuator recomputes that hash
from the live object with the same definition; any difference means the cluster moved and the
plan is stale. resourceVersions are not compared: a Node's changes with every status update,
which would make every MIG plan stale within minutes for reasons the plan does not care about.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuledger.actuator.gateway import ClusterGateway, Obj
from gpuledger.actuator.migconfig import MIG_CONFIG_LABEL, labels
from gpuledger.core.errors import NotFoundError

if TYPE_CHECKING:
    from gpuledger.optimizer.plan.contract import ObservedObject, Plan


def node_state(node: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a Node a MIG plan depends on (the definition in
    `optimizer.plan.contract.ObservedObject`)."""
    return {"mig.config": labels(node).get(MIG_CONFIG_LABEL)}


def cluster_queue_state(queue: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a ClusterQueue a quota plan depends on."""
    spec = queue.get("spec") or {}
    return {"cohortName": spec.get("cohortName"), "resourceGroups": spec.get("resourceGroups") or []}


@dataclass(frozen=True)
class Drift:
    """One observed object that no longer matches the plan."""

    object: str
    reason: str

    def __str__(self) -> str:
        return f"{self.object}: {self.reason}"


Reader = Callable[[ClusterGateway, str], Obj]
Part = Callable[[Mapping[str, Any]], dict[str, Any]]

_LIVE: dict[str, tuple[Reader, Part]] = {
    "Node": (lambda gateway, name: gateway.get_node(name), node_state),
    "ClusterQueue": (lambda gateway, name: gateway.get_cluster_queue(name), cluster_queue_state),
}
"""Observed kind → how to read the live object and which part of it a plan depends on."""


def live_state(gateway: ClusterGateway, observed: ObservedObject) -> str | None:
    """`state_hash` of the live object, or None when it is gone; `KeyError` for unknown kinds."""
    from gpuledger.optimizer.plan.contract import state_hash

    read, part = _LIVE[observed.kind] if observed.kind in _LIVE else _from_writer(observed.kind)
    try:
        return state_hash(part(read(gateway, observed.name)))
    except NotFoundError:
        return None


def _from_writer(kind: str) -> tuple[Reader, Part]:
    """A queue system's quota object (e.g. Volcano's Queue) read through its `QuotaWriter`;
    `KeyError` when no writer owns `kind` or it states no live state."""
    from gpuledger.actuator.queues import WRITERS

    writer = WRITERS.find(lambda w: w.object_kind == kind and hasattr(w, "live_state"))
    if writer is None:
        raise KeyError(kind)
    found = writer
    return (lambda gateway, name: gateway.get(found.ref(name))), found.live_state  # type: ignore[attr-defined]


def drift(gateway: ClusterGateway, plan: Plan) -> list[Drift]:
    """Every observed object whose live state differs from what the plan was computed from."""
    found: list[Drift] = []
    for observed in plan.observed:
        ref = f"{observed.kind}/{observed.name}"
        try:
            state = live_state(gateway, observed)
        except KeyError:
            continue  # an aggregate the optimizer checks itself (e.g. Fleet); nothing live to read
        if state is None:
            found.append(Drift(ref, "no longer exists"))
        elif state != observed.state:
            found.append(Drift(ref, "changed since the plan was computed"))
    return found
