"""How a dimension batch is written: the row by key, and the histories that keep configuration
over time (docs/decisions/0207, 0226, 0227).

1. A dimension load replaces rows by key, except first/last-seen columns (`Column.merge`),
   which keep the earliest/latest of stored and new.
2. The tables of "now" whose rows have a history (`nodes`, `namespaces`) only move forward: a row
   replaces the stored one only when it was observed no earlier (`FORWARD_ONLY`), so a backfill of an
   old window leaves the newest labels for the readers of the current state (waiting, capacity,
   the MIG planner); the history takes the old observation (docs/decisions/0227).
3. A `nodes` load extends `node_history` and marks re-configured rolled-up hours
   (`warehouse.node_history`); a `namespaces` load extends `namespace_history`
   (`warehouse.namespace_history`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from gpuledger.warehouse import namespace_history, node_history

if TYPE_CHECKING:
    import duckdb

    from gpuledger.core.frames import TableSpec

FORWARD_ONLY: tuple[str, ...] = ("nodes", "namespaces")
"""The current-state tables whose rows only move forward in `observed_at` (rule 2; a Prometheus
chunk's rows are observed at the chunk's end). A new row without a time is the load's own now
(newest); a stored row without one is older than any observation."""


def dimension_insert(spec: TableSpec, view: str) -> str:
    """`INSERT OR REPLACE` of a dimension batch (rules 1-2)."""
    cols = ", ".join(spec.column_names)
    on = " AND ".join(f"t.{k} = n.{k}" for k in spec.key)
    if spec.name in FORWARD_ONLY:
        new, old = "coalesce(n.observed_at, now())", "coalesce(t.observed_at, TIMESTAMPTZ '-infinity')"
        return (
            f"INSERT OR REPLACE INTO {spec.name} ({cols}) "
            f"SELECT {', '.join(f'n.{c}' for c in spec.column_names)} FROM {view} n "
            f"LEFT JOIN {spec.name} t ON {on} WHERE t.{spec.key[0]} IS NULL OR {new} >= {old}"
        )
    merging = [c for c in spec.columns if c.merge != "replace"]
    if not merging:
        return f"INSERT OR REPLACE INTO {spec.name} ({cols}) SELECT {cols} FROM {view}"
    pick = {"earliest": "least", "latest": "greatest"}
    select = ", ".join(
        f"n.{c.name}" if c.merge == "replace" else f"{pick[c.merge]}(n.{c.name}, t.{c.name})"
        for c in spec.columns
    )
    return (
        f"INSERT OR REPLACE INTO {spec.name} ({cols}) "
        f"SELECT {select} FROM {view} n LEFT JOIN {spec.name} t ON {on}"
    )


def extend_history(
    con: duckdb.DuckDBPyConnection, table: str, view: str,
    mark_dirty: Callable[[datetime | None], None],
) -> None:
    """Rule 3: add the batch's changed configuration to the table's history, if it has one."""
    if table == "nodes":
        first = con.sql(node_history.changed_from(view)).fetchall()
        mark_dirty(first[0][0] if first else None)
        con.execute(node_history.NODE_HISTORY.insert(view))
        con.execute(node_history.NODE_HISTORY.squash(view))
    elif table == "namespaces":
        con.execute(namespace_history.NAMESPACE_HISTORY.insert(view))
        con.execute(namespace_history.NAMESPACE_HISTORY.squash(view))
