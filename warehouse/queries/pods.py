"""One row per pod name: how every query reads a pod's owner, labels and requests from `pods`.

`pods` keeps one row per incarnation of a name: spans of one (namespace, pod) that overlap or
touch are merged, spans apart stay apart (`warehouse.store`, interval tables): a StatefulSet's
`llm-0` recreated, a notebook started again, a Deployment's pod whose kube-state-metrics series
a gap in collection broke in two. Joined on the name, every such row repeats what it is joined
to (a holder counted twice, its tokens/s and queue summed twice, a MIG slice held twice). So a
query that names a pod's facts by (namespace, pod) takes them from `newest_incarnation`: one
row per name, the facts of its newest incarnation (the largest `end_ts`), NULL where that
incarnation has none (the newest facts, never an older incarnation's value in their place).
"""

from __future__ import annotations

from collections.abc import Mapping


def newest_incarnation(columns: Mapping[str, str], *, within: str | None = None,
                       where: str | None = None) -> str:
    """SQL of one row per (`namespace`, `pod`) of `pods` with each of `columns` (output name →
    expression over a `pods` row) as its newest incarnation has it. `within`: a relation with
    `namespace` and `pod` columns (a CTE's name) whose names alone are read (a semi-join before
    the grouping); `where`: a condition on the rows read."""
    picked = ", ".join(f"arg_max_null({sql}, p.end_ts) AS {name}" for name, sql in columns.items())
    semi = f" SEMI JOIN {within} k ON k.namespace = p.namespace AND k.pod = p.pod" if within else ""
    condition = f" WHERE {where}" if where else ""
    return f"SELECT p.namespace, p.pod, {picked} FROM pods p{semi}{condition} GROUP BY p.namespace, p.pod"
