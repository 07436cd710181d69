"""THE ClusterQueue → team mapping, read from the warehouse's inventory.

Why one home: the quota optimizer (whose guaranteed minimums are per team) and the dashboard
(whose queue views are filtered to a lead's teams) must agree on who owns a ClusterQueue.

The rule: a team uses a ClusterQueue when one of its namespaces (by the team stored with the
namespace at collection) holds a LocalQueue whose `spec.clusterQueue` names it. LocalQueues
without `spec.clusterQueue` submit nowhere (Kueue requires the field) and are ignored; so are
namespaces stored without a team. A ClusterQueue shared by several teams has all of them in
`queue_team_sets`, and no single owner in `queue_owners`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from gpuledger.warehouse.queries.teams import local_queue_teams

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse

Spec = str | Mapping[str, object] | None
"""A LocalQueue spec as stored (JSON text) or already parsed."""


def target_cluster_queue(spec: Spec) -> str | None:
    """The ClusterQueue a LocalQueue spec (JSON text or mapping) submits to, if it names one.

    Accepts the spec itself or a whole object with a `spec` inside (hand-loaded rows)."""
    data: object = spec
    if isinstance(spec, str):
        try:
            data = json.loads(spec)
        except json.JSONDecodeError:
            return None
    if not isinstance(data, Mapping):
        return None
    inner = data.get("spec")
    target = data.get("clusterQueue") or (inner.get("clusterQueue") if isinstance(inner, Mapping) else None)
    return str(target) if target else None


def teams_by_cluster_queue(rows: Iterable[tuple[Spec, str | None]]) -> dict[str, frozenset[str]]:
    """(LocalQueue spec, namespace team) pairs → ClusterQueue → teams (the pure rule)."""
    out: dict[str, set[str]] = {}
    for spec, team in rows:
        target = target_cluster_queue(spec)
        if target and team:
            out.setdefault(target, set()).add(team)
    return {cq: frozenset(teams) for cq, teams in sorted(out.items())}


def queue_team_sets(wh: Warehouse) -> dict[str, frozenset[str]]:
    """Every ClusterQueue some team submits to → all teams that submit to it."""
    frame = local_queue_teams(wh)
    return teams_by_cluster_queue(zip(frame["spec"].to_list(), frame["team"].to_list(), strict=True))


def queue_owners(wh: Warehouse) -> dict[str, str]:
    """ClusterQueue → its one team; queues shared by several teams (or by none) are left out."""
    return single_owners(queue_team_sets(wh))


def single_owners(sets: Mapping[str, frozenset[str]]) -> dict[str, str]:
    """The ClusterQueues of `sets` with exactly one team, mapped to it."""
    return {cq: next(iter(teams)) for cq, teams in sets.items() if len(teams) == 1}
