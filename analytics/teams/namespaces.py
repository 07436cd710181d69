"""Which team a namespace is billed to, at billing time.

The collector stores the team it resolved in `namespaces.team`. The bill resolves again with
the same rule (`core.teams`: team label, then `Settings.teams.fallback`), so a rule added after
collection (or a namespace the inventory never saw) still lands on a team without
re-collecting. A stored team wins; what stays without a team is billed as `unattributed`.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.core.teams import fallback_team, resolve_team, stored_labels
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.queries.teams import namespace_rows


def team_table(wh: Warehouse, namespaces: Iterable[str], settings: Settings) -> pl.DataFrame:
    """`namespace`, `team` (None when unattributed) for the given namespaces."""
    wanted = sorted(set(namespaces))
    known = {
        row["namespace"]: row["team"]
        or resolve_team(row["namespace"], stored_labels(row["labels"]), settings.teams)
        for row in namespace_rows(wh).iter_rows(named=True)
    }
    teams = [known.get(ns) or fallback_team(ns, settings.teams) for ns in wanted]
    return pl.DataFrame(
        {"namespace": wanted, "team": teams}, schema={"namespace": pl.String, "team": pl.String}
    )
