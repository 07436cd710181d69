"""THE Volcano Queue → team mapping, read from the warehouse's inventory.

Why one home: the quota optimizer (guaranteed minimums per team), the bill's queue lines and
the Queues page must agree on who owns a Volcano Queue, as they do for Kueue
(`analytics.teams.queues`).

The rule: a team uses a Queue when one of its namespaces (by the team stored with the
namespace) holds a PodGroup whose `spec.queue` names it (Volcano's `default` queue when the
field is unset). Volcano Queues are cluster-scoped and carry no namespace, so the PodGroups,
which every Volcano job has, are the link. A Queue used by several teams has no single owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuledger.analytics.teams.queues import queue_team_sets, single_owners
from gpuledger.warehouse.queries.volcano import podgroup_teams

if TYPE_CHECKING:
    from gpuledger.warehouse import Warehouse


def volcano_queue_team_sets(wh: Warehouse) -> dict[str, frozenset[str]]:
    """Every Volcano Queue some team submits a PodGroup to → all such teams."""
    out: dict[str, set[str]] = {}
    for queue, team in podgroup_teams(wh).iter_rows():
        out.setdefault(queue, set()).add(team)
    return {q: frozenset(t) for q, t in sorted(out.items())}


def volcano_queue_owners(wh: Warehouse) -> dict[str, str]:
    """Volcano Queue → its one team (shared or unused queues are left out)."""
    return single_owners(volcano_queue_team_sets(wh))


def any_queue_team_sets(wh: Warehouse) -> dict[str, frozenset[str]]:
    """Kueue ClusterQueues and Volcano Queues alike → the teams submitting to each (a name used
    by both systems joins their teams): what a page filtering queues by team needs."""
    out = dict(queue_team_sets(wh))
    for name, teams in volcano_queue_team_sets(wh).items():
        out[name] = out.get(name, frozenset()) | teams
    return out
