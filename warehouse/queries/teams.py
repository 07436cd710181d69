"""Read queries behind team resolution: stored namespace teams and LocalQueue → namespace team.

Why here: only `warehouse/` speaks SQL. `analytics.teams.namespaces` (the bill's namespace → team over time)
and `analytics.teams.queues` (ClusterQueue → team, for the optimizer and the dashboard) read
these rows and apply the rules in `core.teams` / `analytics.teams.queues` in Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.warehouse import Warehouse


def namespace_history_rows(wh: Warehouse) -> pl.DataFrame:
    """Every stored team of every namespace with its start: `namespace`, `valid_from`, `team`,
    `labels` (JSON text), oldest first (`warehouse.namespace_history`). A namespace written to
    `namespaces` without a history row (outside a load) gives its one row, valid always."""
    return wh.query(
        "SELECT namespace, valid_from, team, CAST(labels AS VARCHAR) AS labels FROM namespace_history"
        " UNION ALL SELECT namespace, NULL::TIMESTAMPTZ, team, CAST(labels AS VARCHAR) FROM namespaces"
        " WHERE namespace NOT IN (SELECT namespace FROM namespace_history)"
        " ORDER BY namespace, valid_from NULLS FIRST"
    )


def local_queue_teams(wh: Warehouse) -> pl.DataFrame:
    """Every LocalQueue whose namespace has a stored team: `name`, `namespace`, `spec` (the
    LocalQueue's spec as JSON text; `clusterQueue` names where it submits), `team`.

    Namespaces without a stored team (NULL or empty) give no rows: a queue is owned only by a
    team the inventory saw labelled.
    """
    return wh.query(
        "SELECT q.name, q.namespace, CAST(q.spec AS VARCHAR) AS spec, n.team FROM queues q"
        " JOIN namespaces n ON n.namespace = q.namespace"
        " WHERE q.kind = 'LocalQueue' AND n.team IS NOT NULL AND n.team <> ''"
        " ORDER BY q.namespace, q.name"
    )
