"""Namespace team labels over time: how a `namespaces` load extends `namespace_history`
(docs/decisions/0226).

Why: `namespaces` keeps one row per namespace, replaced by every collect, so a bill read the team
of the last collect: a namespace relabelled from team a to team b on day 2 moved day 1's cost to
b (issue 31 item 7). The history keeps every team and label set a namespace had, each from its
`valid_from` to the namespace's next row; the bill (`analytics.teams.namespaces.with_teams`)
gives each day to the team in force at the day's start.

The rules are node_history's (`warehouse.node_history`, docs/decisions/0207), for namespaces:
1. `valid_from` is `observed_at` (when the API or kube-state-metrics was read), else the load's
   time. A namespace's first row also stands for the time before it: nothing earlier is known,
   and an upgraded warehouse (v015: one row per namespace) bills what it billed before.
2. A row is added only where the team or the label set differs from the row in force at its
   `valid_from`. An observation older than a namespace's first row (a backfill loaded after
   newer collects) is the best evidence for the time before that row: it becomes the new first
   row (docs/decisions/0227).
3. A row with the same namespace and `valid_from` is replaced; rows at other times are never
   touched, so re-running a load changes nothing.
4. Nothing rolled up stores a team (`card_hours_hourly` keys by namespace; the bill joins the
   team at billing time), so a relabel marks no hour for a re-roll.
5. Consecutive rows of a namespace differ: after a load, a row that repeats the row before it
   is removed (an older observation that agrees with the first row moves its start earlier).
"""

from __future__ import annotations

from gpuledger.core.frames import NAMESPACE_CONFIG_COLUMNS
from gpuledger.warehouse.config_history import ConfigHistory

CONFIG_COLUMNS = NAMESPACE_CONFIG_COLUMNS
"""The columns besides `labels` that are configuration (rule 2; declared with the table, `core.frames`)."""


NAMESPACE_HISTORY = ConfigHistory("namespace_history", "namespace", CONFIG_COLUMNS,
                                  lambda alias: f"CAST({alias}.labels AS VARCHAR)",
                                  "coalesce(observed_at, now())")
"""`namespace_history`'s rows (rules 1-3, 5) by the shared SQL (`warehouse.config_history`)."""
