"""Configuration over time, the SQL shared by every history table (`node_history`,
`namespace_history`): which rows of a batch change what is in force, and repeats squashed.

Why one home: a node's labels (docs/decisions/0207) and a namespace's team (0226) keep their
validity interval by the same rules — a row only on a change, a row at the same key and time
replaced, consecutive rows always different (0227). What differs per table is data: its key,
its configuration columns, how its labels compare, where a row's time comes from; those are
the fields of a `ConfigHistory`. The per-table rules and their reasons stay in
`warehouse.node_history` and `warehouse.namespace_history`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigHistory:
    """One history table: `table` keyed by (`key`, `valid_from`), holding `columns` and `labels`
    of the dimension rows it follows."""

    table: str
    key: str
    columns: tuple[str, ...]
    labels: Callable[[str], str]
    """SQL of `alias`'s labels as compared (e.g. without labels that change on every relabel)."""
    row_time: str
    """SQL of a batch row's time (`valid_from` of the row it would add), on the batch's columns."""

    def same(self, a: str, b: str) -> str:
        """Rows `a` and `b` hold the same configuration."""
        return " AND ".join([f"{a}.{c} IS NOT DISTINCT FROM {b}.{c}" for c in self.columns]
                            + [f"{self.labels(a)} IS NOT DISTINCT FROM {self.labels(b)}"])

    def fresh(self, view: str, *, first_before: bool) -> str:
        """CTEs `n` (the batch `view` with its `_from`) and `fresh` (its rows that differ from the
        row in force at their `_from`). `first_before`: before a key's first row, the first row
        is in force (it prices that time); else nothing is, and every older row is fresh."""
        t, k = self.table, self.key
        earlier = f"(SELECT max(p.valid_from) FROM {t} p WHERE p.{k} = n.{k} AND p.valid_from <= n._from)"
        first = f"(SELECT min(p.valid_from) FROM {t} p WHERE p.{k} = n.{k})"
        in_force = f"coalesce({earlier}, {first})" if first_before else earlier
        return f"""
            n AS (SELECT *, {self.row_time} AS _from FROM {view}),
            fresh AS (
                SELECT n.* FROM n WHERE NOT EXISTS (
                    SELECT 1 FROM {t} h
                    WHERE h.{k} = n.{k} AND {self.same('h', 'n')} AND h.valid_from = {in_force}
                )
            )"""

    def insert(self, view: str) -> str:
        """The statement adding the batch's rows that change what is in force (a row at the same
        key and time replaced; an older row than a key's first always added: `squash` merges it)."""
        cols = ", ".join(self.columns)
        return f"""
            INSERT OR REPLACE INTO {self.table} ({self.key}, valid_from, {cols}, labels, observed_at)
            WITH {self.fresh(view, first_before=False)}
            SELECT {self.key}, _from, {cols}, labels, observed_at FROM fresh
        """

    def squash(self, view: str) -> str:
        """The statement removing, on the batch's keys, each row that repeats the row before it:
        run after `insert`."""
        t, k = self.table, self.key
        before = f"(SELECT max(q.valid_from) FROM {t} q WHERE q.{k} = h.{k} AND q.valid_from < h.valid_from)"
        return f"""
            DELETE FROM {t} h
            WHERE h.{k} IN (SELECT {k} FROM {view}) AND EXISTS (
                SELECT 1 FROM {t} p WHERE p.{k} = h.{k} AND p.valid_from = {before}
                  AND {self.same('p', 'h')})
        """
