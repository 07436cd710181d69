"""Which team a namespace is billed to.

The collector stores the team label's value in `namespaces.team` (NULL when unlabeled, after
its own fallback rules). The bill applies `Settings.teams.fallback` again at billing time, so
a rule added after collection (or a namespace the inventory never saw) still lands on a team
without re-collecting. Rules are tried in order; a rule's regex must match the whole namespace
and its team may use groups (`\\1`). What stays without a team is billed as `unattributed`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

import polars as pl

from gpuledger.core.config import Settings
from gpuledger.warehouse import Warehouse

UNATTRIBUTED = "unattributed"
UNALLOCATED = "unallocated"
SHARING_DISCOUNT = "sharing_discount"
SPECIAL_LINES = (UNALLOCATED, UNATTRIBUTED, SHARING_DISCOUNT)


def _label_team(team: str | None, labels: str | None, label_key: str) -> str | None:
    if team:
        return team
    if not labels:
        return None
    try:
        data = json.loads(labels)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    value = data.get(label_key)
    return str(value) if value else None


def fallback_team(namespace: str, settings: Settings) -> str | None:
    for rule in settings.teams.fallback:
        match = re.fullmatch(rule.namespace_regex, namespace)
        if match:
            return match.expand(rule.team)
    return None


def team_table(wh: Warehouse, namespaces: Iterable[str], settings: Settings) -> pl.DataFrame:
    """`namespace`, `team` (None when unattributed) for the given namespaces."""
    wanted = sorted(set(namespaces))
    stored = wh.query("SELECT namespace, team, CAST(labels AS VARCHAR) AS labels FROM namespaces")
    known = {
        row["namespace"]: _label_team(row["team"], row["labels"], settings.teams.label_key)
        for row in stored.iter_rows(named=True)
    }
    teams = [known.get(ns) or fallback_team(ns, settings) for ns in wanted]
    return pl.DataFrame(
        {"namespace": wanted, "team": teams}, schema={"namespace": pl.String, "team": pl.String}
    )
